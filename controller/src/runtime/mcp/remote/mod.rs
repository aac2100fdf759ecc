//! Remote MCP servers: what it takes to reach a server over the network,
//! for both transports Qwen Code speaks — streamable HTTP (`httpUrl`) and
//! the legacy HTTP+SSE transport (`url`).
//!
//! This module owns the endpoint (URL, configured headers, the OAuth access
//! token from Qwen Code's token store — [`oauth`]), the one HTTP client with
//! its TLS roots ([`tls`]), the SSE client transport ([`sse`]), and the
//! judgement of when an established session is lost ([`SessionWatch`]).
//! [`super`] runs the protocol over the transports built here.
//!
//! - **A lost session is reported at once, with its reason.** A remote
//!   server that restarted forgets our session (HTTP 404), one that is down
//!   refuses the connection, an expired token gets HTTP 401, an SSE stream
//!   ends: the first request (or stream read) that sees it reports it through
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
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransportConfig, StreamableHttpError,
};
use rmcp::transport::{StreamableHttpClientTransport, Transport};
use steward_schema::resource::{McpServerSpec, McpTransport, Reason};
use tokio::time::Instant;

use self::sse::{SseError, SseTransport};
use self::streamable::WatchedClient;
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
    /// The OAuth access token to send as `Authorization: Bearer`.
    bearer: Option<String>,
    /// The shared HTTP client.
    client: reqwest::Client,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("headers", &self.headers.len())
            .field("bearer", &self.bearer.is_some())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// The configured headers plus `Authorization: Bearer <token>` when
    /// there is a token (for transports that set every header themselves).
    fn all_headers(&self) -> HeaderMap {
        let mut headers = self.headers.clone();
        if let Some(token) = &self.bearer
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
/// gets the shared client, and the OAuth token (refreshed when it expired)
/// from Qwen Code's token store. Messages start without the URL: the caller
/// prefixes `connect to <redacted url>: `.
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
    let store = oauth::TokenStore::for_process();
    let bearer = oauth::access_token(&store, &client, name, spec).await?;
    let mut endpoint = Endpoint {
        url: url.to_owned(),
        headers,
        bearer,
        client,
    };
    if endpoint.bearer.is_some() {
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
    tracing::debug!(server = %name, transport = ?spec.transport, headers = endpoint.headers.len(), oauth = endpoint.bearer.is_some(), "connecting to mcp server");
    if spec.transport == McpTransport::Sse {
        let headers = endpoint.all_headers();
        let connecting =
            SseTransport::connect(endpoint.client, &endpoint.url, headers, watch.clone());
        return match tokio::time::timeout_at(deadline, connecting).await {
            Ok(Ok(transport)) => Ok(RemoteTransport::Sse(transport)),
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
    if let Some(token) = endpoint.bearer {
        config = config.auth_header(token);
    }
    let http = WatchedClient::new(endpoint.client, watch.clone());
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
    report: Mutex<Option<Report>>,
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
                report: Mutex::new(Some(Box::new(report))),
            }),
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
    /// a failed handshake really means then.
    pub fn auth_required(&self, name: &str) -> Option<StartError> {
        self.unauthorized().then(|| {
            StartError::new(
                Reason::AuthRequired,
                auth_required_message(name, "the server refused the credentials (HTTP 401)"),
            )
        })
    }
}

/// The message of a server that refuses our credentials (or wants some):
/// how to authenticate, as Qwen Code says it.
pub fn auth_required_message(name: &str, what: &str) -> String {
    format!(
        "{what}; authenticate with Qwen Code: open the /mcp dialog in an interactive `qwen` \
         session and authenticate with '{name}' (Steward uses the token Qwen Code stores in \
         HOME_DIR/{})",
        oauth::TOKENS_FILE
    )
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

//! The legacy HTTP+SSE client transport (MCP 2024-11-05), which Qwen Code
//! uses for a server configured with a plain `url`; rmcp 3 has no client for
//! it.
//!
//! `GET url` opens an event stream whose first `endpoint` event names where
//! to POST our JSON-RPC messages (same origin, usually with a session id in
//! its query); every answer and notification arrives on the stream as a
//! `message` event. Events are parsed by `sse-stream`, requests go through
//! the shared reqwest client, and [`SseTransport`] is an rmcp [`Transport`],
//! so the session above it (handshake, lists, pings) is the same as for the
//! other transports.
//!
//! The stream *is* the session: when it ends or breaks after the session was
//! established, that is reported through the [`SessionWatch`] and reads stay
//! pending (the controller stops the connection), so the loss is reported
//! once, with its reason, rather than as a bare "closed".
//!
//! Each message is posted with the OAuth token source's current bearer
//! (refreshed before it expires), as the streamable-HTTP transport does: a
//! 401 is retried once with another token when the source has one, and a
//! request still refused is noted as refused before the session's loss is
//! reported, so its call says it did not run.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use reqwest::header::{
    ACCEPT, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, HeaderMap, HeaderValue, WWW_AUTHENTICATE,
};
use reqwest::{StatusCode, Url};
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use sse_stream::{Sse, SseStream};

use super::oauth::source::TokenSource;
use super::streamable::work_id;
use super::{Loss, SessionWatch, error_chain};

const EVENT_STREAM: &str = "text/event-stream";

/// Why the SSE transport failed. Never shows a URL: the endpoint's query is
/// the session's credential, and rmcp logs transport errors.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("open the event stream")]
    Connect(#[source] reqwest::Error),
    #[error("the event stream request got HTTP {0}")]
    Status(StatusCode),
    #[error("the event stream request got content type {0:?}, not text/event-stream")]
    ContentType(String),
    #[error("the event stream ended before its endpoint event")]
    NoEndpoint,
    #[error("the endpoint event does not name a URL on the server's origin")]
    BadEndpoint,
    #[error("read the event stream")]
    Read(#[source] sse_stream::Error),
    #[error("post a message")]
    Post(#[source] reqwest::Error),
    #[error("a posted message got HTTP {0}")]
    PostStatus(StatusCode),
    /// HTTP 403 `insufficient_scope`, with the scope the server named.
    #[error("a posted message got HTTP 403: the token lacks scope")]
    InsufficientScope(Option<String>),
    #[error("encode a message")]
    Encode(#[source] serde_json::Error),
}

type Events = BoxStream<'static, Result<Sse, sse_stream::Error>>;

/// A connected HTTP+SSE session.
pub struct SseTransport {
    client: reqwest::Client,
    /// Where messages are posted (never shown: see [`SseError`]).
    endpoint: Url,
    headers: HeaderMap,
    events: Option<Events>,
    watch: SessionWatch,
    /// Where each message's bearer comes from (OAuth).
    source: Option<Arc<TokenSource>>,
}

impl std::fmt::Debug for SseTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseTransport")
            .field("open", &self.events.is_some())
            .finish_non_exhaustive()
    }
}

impl SseTransport {
    /// Opens the event stream at `url` with `headers` (sent with every
    /// request) and waits for its `endpoint` event. The caller bounds the wait.
    pub async fn connect(
        client: reqwest::Client,
        url: &str,
        headers: HeaderMap,
        watch: SessionWatch,
    ) -> Result<SseTransport, SseError> {
        let response = client
            .get(url)
            .headers(headers.clone())
            .header(ACCEPT, EVENT_STREAM)
            .header(CACHE_CONTROL, "no-cache")
            .send()
            .await
            .map_err(|error| SseError::Connect(error.without_url()))?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED {
            watch.lost(Loss::Unauthorized);
        }
        if !status.is_success() {
            return Err(SseError::Status(status));
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if !content_type
            .split(';')
            .next()
            .is_some_and(|media| media.trim().eq_ignore_ascii_case(EVENT_STREAM))
        {
            return Err(SseError::ContentType(content_type));
        }
        // The base for a relative endpoint is the URL the stream came from.
        let base = response.url().clone();
        let mut events: Events = SseStream::from_bytes_stream(response.bytes_stream()).boxed();
        let endpoint = loop {
            match events.next().await {
                Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                    break endpoint_url(&base, event.data.as_deref().unwrap_or_default())?;
                }
                Some(Ok(_)) => continue,
                Some(Err(error)) => return Err(SseError::Read(error)),
                None => return Err(SseError::NoEndpoint),
            }
        };
        Ok(SseTransport {
            client,
            endpoint,
            headers,
            events: Some(events),
            watch,
            source: None,
        })
    }

    /// Each message's `Authorization` from now on: `source`'s bearer, when
    /// it has one.
    pub fn with_source(mut self, source: Arc<TokenSource>) -> SseTransport {
        self.source = Some(source);
        self
    }

    /// The stream ended: reported as a loss once the session is established
    /// (then reads stay pending); before that the session simply closes.
    async fn ended(&mut self, how: String) -> Option<ServerJsonRpcMessage> {
        self.events = None;
        if self.watch.lost(Loss::StreamEnded(how)) {
            std::future::pending::<()>().await;
        }
        None
    }
}

/// The endpoint event's URL, resolved against the stream's URL; it must
/// stay on the same origin (the SDKs check this too: a server must not send
/// our messages, and their headers, elsewhere).
fn endpoint_url(base: &Url, data: &str) -> Result<Url, SseError> {
    let endpoint = base.join(data.trim()).map_err(|_| SseError::BadEndpoint)?;
    if endpoint.origin() != base.origin() {
        return Err(SseError::BadEndpoint);
    }
    Ok(endpoint)
}

/// The `WWW-Authenticate` challenge of a `403 insufficient_scope`.
fn insufficient_scope(response: &reqwest::Response) -> Option<String> {
    if response.status() != StatusCode::FORBIDDEN {
        return None;
    }
    let challenge = response.headers().get(WWW_AUTHENTICATE)?.to_str().ok()?;
    challenge
        .contains("insufficient_scope")
        .then(|| challenge.to_owned())
}

/// The `scope` parameter of a Bearer challenge.
fn scope_of(challenge: &str) -> Option<String> {
    let (_, rest) = challenge.split_once("scope=\"")?;
    let (scope, _) = rest.split_once('"')?;
    Some(scope.to_owned())
}

/// How a message is posted: where, with which headers.
struct Post {
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
}

impl Post {
    /// Posts `body` with `bearer` (when there is one) as its
    /// `Authorization`; an unreachable server is a lost session.
    async fn send(
        &self,
        body: &[u8],
        bearer: Option<&str>,
        watch: &SessionWatch,
    ) -> Result<reqwest::Response, SseError> {
        let mut headers = self.headers.clone();
        if let Some(token) = bearer
            && let Ok(mut value) = HeaderValue::from_str(&format!("Bearer {token}"))
        {
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let sent = self
            .client
            .post(self.endpoint.clone())
            .headers(headers)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(body.to_vec())
            .send()
            .await;
        sent.map_err(|error| {
            let error = error.without_url();
            if error.is_connect() {
                watch.lost(Loss::Unreachable(error_chain(&error)));
            }
            SseError::Post(error)
        })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        let body = serde_json::to_vec(&item);
        let work = work_id(&item);
        let post = Post {
            client: self.client.clone(),
            endpoint: self.endpoint.clone(),
            headers: self.headers.clone(),
        };
        let watch = self.watch.clone();
        let source = self.source.clone();
        async move {
            let body = body.map_err(SseError::Encode)?;
            let bearer = match &source {
                Some(source) => source.bearer().await,
                None => None,
            };
            let mut response = post.send(&body, bearer.as_deref(), &watch).await?;
            // Refused: once more with a token another process stored or a
            // refreshed one, if there is one.
            if response.status() == StatusCode::UNAUTHORIZED
                && let Some(source) = &source
            {
                let challenge = response
                    .headers()
                    .get(WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                if let Some(token) = source
                    .unauthorized(bearer.as_deref(), challenge.as_deref())
                    .await
                {
                    response = post.send(&body, Some(&token), &watch).await?;
                }
            }
            // Refused for lack of scope: once more with a token signed in
            // since, else the scope asked for is kept for the next sign-in.
            if let (Some(challenge), Some(source)) = (insufficient_scope(&response), &source)
                && let Some(token) = source.forbidden(bearer.as_deref(), &challenge).await
            {
                response = post.send(&body, Some(&token), &watch).await?;
            }
            match response.status() {
                status if status.is_success() => {
                    // Read the (short) body so the connection can be reused.
                    let _ = response.bytes().await;
                    if let (Some(_), Some(source)) = (&work, &source) {
                        source.succeeded().await;
                    }
                    Ok(())
                }
                StatusCode::NOT_FOUND => {
                    watch.lost(Loss::SessionUnknown);
                    Err(SseError::PostStatus(StatusCode::NOT_FOUND))
                }
                StatusCode::UNAUTHORIZED => {
                    // Noted before the loss is reported: the session's end
                    // then closes a request known not to have run.
                    if let Some(id) = work {
                        watch.refused(id, source.as_ref().and_then(|s| s.transient()));
                    }
                    watch.lost(Loss::Unauthorized);
                    Err(SseError::PostStatus(StatusCode::UNAUTHORIZED))
                }
                // Not run; the session goes on. The call asks for a
                // sign-in with more scope (through the agent when it can).
                StatusCode::FORBIDDEN if let Some(challenge) = insufficient_scope(&response) => {
                    watch.forbidden();
                    Err(SseError::InsufficientScope(scope_of(&challenge)))
                }
                status => Err(SseError::PostStatus(status)),
            }
        }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            let next = self.events.as_mut()?.next().await;
            match next {
                Some(Ok(event)) => {
                    // An event without a type is a `message` (SSE spec).
                    if !matches!(event.event.as_deref(), None | Some("message")) {
                        continue;
                    }
                    let Some(data) = event.data else { continue };
                    let typed = crate::runtime::mcp::wire::typed_line(data.as_bytes());
                    match serde_json::from_slice(typed.as_deref().unwrap_or(data.as_bytes())) {
                        Ok(message) => return Some(message),
                        Err(error) => {
                            // Content is not logged: it may carry results.
                            tracing::debug!(%error, "ignoring an sse message that is not JSON-RPC");
                        }
                    }
                }
                Some(Err(error)) => {
                    return self
                        .ended(format!("the event stream broke: {}", error_chain(&error)))
                        .await;
                }
                None => {
                    return self
                        .ended("the server closed the event stream".to_owned())
                        .await;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), SseError> {
        // Dropping the response body closes the stream's connection.
        self.events = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scope_a_challenge_names_is_read() {
        let challenge = r#"Bearer error="insufficient_scope", scope="mcp:admin files:write", resource_metadata="http://x/.well-known/oauth-protected-resource""#;
        assert_eq!(
            scope_of(challenge).as_deref(),
            Some("mcp:admin files:write")
        );
        assert_eq!(scope_of(r#"Bearer error="insufficient_scope""#), None);
    }

    #[test]
    fn the_endpoint_resolves_against_the_stream_and_stays_on_its_origin() {
        let base = Url::parse("https://mcp.example:8443/v1/sse?key=secret").unwrap();
        assert_eq!(
            endpoint_url(&base, "/messages?sessionId=abc")
                .unwrap()
                .as_str(),
            "https://mcp.example:8443/messages?sessionId=abc"
        );
        assert_eq!(
            endpoint_url(&base, "message?sessionId=abc\n")
                .unwrap()
                .as_str(),
            "https://mcp.example:8443/v1/message?sessionId=abc"
        );
        assert_eq!(
            endpoint_url(&base, "https://mcp.example:8443/m")
                .unwrap()
                .as_str(),
            "https://mcp.example:8443/m"
        );
        for elsewhere in [
            "https://evil.example/messages",
            "http://mcp.example:8443/messages",
            "//evil.example/m",
        ] {
            assert!(
                matches!(endpoint_url(&base, elsewhere), Err(SseError::BadEndpoint)),
                "{elsewhere}"
            );
        }
    }
}

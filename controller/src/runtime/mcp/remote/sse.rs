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

use std::future::Future;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use reqwest::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use sse_stream::{Sse, SseStream};

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
        })
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

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        let request = serde_json::to_vec(&item).map(|body| {
            self.client
                .post(self.endpoint.clone())
                .headers(self.headers.clone())
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(body)
        });
        let watch = self.watch.clone();
        async move {
            let response = match request.map_err(SseError::Encode)?.send().await {
                Ok(response) => response,
                Err(error) => {
                    let error = error.without_url();
                    if error.is_connect() {
                        watch.lost(Loss::Unreachable(error_chain(&error)));
                    }
                    return Err(SseError::Post(error));
                }
            };
            match response.status() {
                status if status.is_success() => {
                    // Read the (short) body so the connection can be reused.
                    let _ = response.bytes().await;
                    Ok(())
                }
                StatusCode::NOT_FOUND => {
                    watch.lost(Loss::SessionUnknown);
                    Err(SseError::PostStatus(StatusCode::NOT_FOUND))
                }
                StatusCode::UNAUTHORIZED => {
                    watch.lost(Loss::Unauthorized);
                    Err(SseError::PostStatus(StatusCode::UNAUTHORIZED))
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
                    match serde_json::from_str(&data) {
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

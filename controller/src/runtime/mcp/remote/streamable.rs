//! The streamable-HTTP side: reqwest, as rmcp drives it, with every answer
//! looked at for a lost session ([`SessionWatch`]), and what the server
//! sends on the response stream of one of our requests (its requests to the
//! client, its log lines) tagged with that request's id, so that the relay
//! routes it to the call that caused it (the `_meta` key
//! `dev.steward/call`, taken off before anything goes on).
//!
//! A request of protocol 2026-07-28 (its `_meta` names that version: an
//! agent's request to a server that serves that version, see
//! `Upstream::per_request`) goes as that version wants, outside the
//! session: no `Mcp-Session-Id`. rmcp's worker then takes 2026-07-28 for
//! the session's version and would send the session's own requests (and
//! its event stream's) with that header; they keep the session's version.
//!
//! rmcp's streamable-HTTP worker keeps its failures to itself: a 404 on the
//! background SSE stream's reconnect is only logged, and a 404 on a POST is
//! answered by a silent re-initialization. Wrapping the HTTP client is the one
//! place that sees every request — POSTs (ping, lists, calls) and the GET
//! stream's reconnects — so that is where a lost session is noticed.
//!
//! It is also where the OAuth token goes on: each request gets the token
//! source's current bearer (refreshed before it expires); a 401 is retried
//! once with the token the source finds or refreshes, a 403 once with a
//! token signed in since for more scope. Only what fails after that is the
//! request's (and, for a 401, the session's) failure.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use futures::stream::BoxStream;
use reqwest::StatusCode;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, RequestId};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde_json::Value;
use sse_stream::Sse;

use super::oauth::source::TokenSource;
use super::{Loss, SessionWatch, error_chain};

type Result<T> = std::result::Result<T, StreamableHttpError<reqwest::Error>>;

/// A reqwest client that reports lost sessions to a [`SessionWatch`] and
/// sends the [`TokenSource`]'s bearer.
#[derive(Clone, Debug)]
pub struct WatchedClient {
    inner: reqwest::Client,
    watch: SessionWatch,
    source: Option<Arc<TokenSource>>,
    /// The session's protocol version, as its own requests carried it.
    session_version: Arc<Mutex<Option<HeaderValue>>>,
}

/// How a request answered, as far as its token is concerned (with the
/// server's challenge).
enum Refusal {
    Unauthorized(Option<String>),
    Forbidden(String),
}

fn refusal_of(error: &StreamableHttpError<reqwest::Error>) -> Option<Refusal> {
    match error {
        StreamableHttpError::AuthRequired(error) => Some(Refusal::Unauthorized(Some(
            error.www_authenticate_header.clone(),
        ))),
        StreamableHttpError::UnexpectedServerResponse(text) if text.starts_with("HTTP 401") => {
            Some(Refusal::Unauthorized(None))
        }
        StreamableHttpError::Client(error) if error.status() == Some(StatusCode::UNAUTHORIZED) => {
            Some(Refusal::Unauthorized(None))
        }
        StreamableHttpError::InsufficientScope(error) => {
            Some(Refusal::Forbidden(error.www_authenticate_header.clone()))
        }
        _ => None,
    }
}

/// The id of `message` when it is a request other than `initialize`.
pub(super) fn work_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        ClientJsonRpcMessage::Request(request)
            if !matches!(
                request.request,
                rmcp::model::ClientRequest::InitializeRequest(_)
            ) =>
        {
            Some(request.id.clone())
        }
        _ => None,
    }
}

/// The header that names a request's protocol version.
const VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");

/// The protocol version `message` names, when it is a request of
/// 2026-07-28 or later.
fn per_request(message: &ClientJsonRpcMessage) -> Option<rmcp::model::ProtocolVersion> {
    use rmcp::model::GetMeta as _;
    match message {
        JsonRpcMessage::Request(r) => r
            .request
            .get_meta()
            .protocol_version()
            .filter(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str()),
        _ => None,
    }
}

impl WatchedClient {
    pub fn new(
        inner: reqwest::Client,
        watch: SessionWatch,
        source: Option<Arc<TokenSource>>,
    ) -> WatchedClient {
        WatchedClient {
            inner,
            watch,
            source,
            session_version: Arc::default(),
        }
    }

    /// Runs `request` with the source's bearer (or `given`, without a
    /// source); retries a refusal once when the source has another token.
    /// `work`: the id of a request a server may refuse for lack of scope (a
    /// request other than `initialize`), so its success ends a run of
    /// step-ups, and its final 401 is noted as refused.
    async fn authorized<T, F, Fut>(
        &self,
        given: Option<String>,
        work: Option<RequestId>,
        request: F,
    ) -> Result<T>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let Some(source) = &self.source else {
            return self.observe(request(given).await);
        };
        let bearer = source.bearer().await;
        let first = request(bearer.clone()).await;
        let retry = match first.as_ref().err().and_then(refusal_of) {
            Some(Refusal::Unauthorized(challenge)) => {
                source
                    .unauthorized(bearer.as_deref(), challenge.as_deref())
                    .await
            }
            Some(Refusal::Forbidden(challenge)) => {
                source.forbidden(bearer.as_deref(), &challenge).await
            }
            None => None,
        };
        let result = match retry {
            Some(token) => request(Some(token)).await,
            None => first,
        };
        match &result {
            Ok(_) if work.is_some() => source.succeeded().await,
            Ok(_) => {}
            Err(StreamableHttpError::InsufficientScope(_)) => self.watch.forbidden(),
            Err(error) => {
                // Noted before the loss is reported: the session's end then
                // closes a request known not to have run.
                if let (Some(id), Some(Refusal::Unauthorized(_))) = (work, refusal_of(error)) {
                    self.watch.refused(id, source.transient());
                }
            }
        }
        self.observe(result)
    }

    /// The session to send `message` in (none for a request of
    /// 2026-07-28), its headers keeping the session's version (see the
    /// module doc).
    fn fit(
        &self,
        message: Option<&ClientJsonRpcMessage>,
        session_id: Option<Arc<str>>,
        headers: &mut HashMap<HeaderName, HeaderValue>,
    ) -> Option<Arc<str>> {
        if let Some(version) = message.and_then(per_request) {
            if let Ok(version) = HeaderValue::from_str(version.as_str()) {
                headers.insert(VERSION, version);
            }
            return None;
        }
        let mut kept = crate::support::sync::lock(&self.session_version);
        match headers.get(&VERSION) {
            Some(version) if version.as_bytes() >= b"2026-07-28".as_slice() => {
                if let Some(session) = kept.as_ref() {
                    headers.insert(VERSION, session.clone());
                }
            }
            Some(version) => *kept = Some(version.clone()),
            None => {}
        }
        session_id
    }

    /// Reports a loss, and takes the URL out of reqwest's errors: rmcp logs
    /// them, and the URL's query may be a credential.
    fn observe<T>(&self, result: Result<T>) -> Result<T> {
        let result = result.map_err(without_url);
        if let Err(error) = &result
            && let Some(loss) = loss_of(error)
        {
            self.watch.lost(loss);
        }
        result
    }
}

fn without_url(error: StreamableHttpError<reqwest::Error>) -> StreamableHttpError<reqwest::Error> {
    match error {
        StreamableHttpError::Client(error) => StreamableHttpError::Client(error.without_url()),
        other => other,
    }
}

/// Whether `error` means the session is gone (rather than one request
/// failing): the session is unknown, the credentials are refused, or the
/// server cannot be reached at all.
fn loss_of(error: &StreamableHttpError<reqwest::Error>) -> Option<Loss> {
    match error {
        StreamableHttpError::SessionExpired => Some(Loss::SessionUnknown),
        StreamableHttpError::AuthRequired(_) => Some(Loss::Unauthorized),
        // A 401 without a challenge is only an "unexpected response" to
        // rmcp, which keeps the status at the start of its text.
        StreamableHttpError::UnexpectedServerResponse(text) if text.starts_with("HTTP 401") => {
            Some(Loss::Unauthorized)
        }
        StreamableHttpError::Client(error) => match error.status() {
            Some(StatusCode::NOT_FOUND) => Some(Loss::SessionUnknown),
            Some(StatusCode::UNAUTHORIZED) => Some(Loss::Unauthorized),
            Some(_) => None,
            None if error.is_connect() => Some(Loss::Unreachable(error_chain(error))),
            None => None,
        },
        _ => None,
    }
}

/// `response`, its events typed ([`typed_event`]) and tagged when it is
/// the event stream of request `id` (see the module doc).
fn tagged(
    response: Result<StreamableHttpPostResponse>,
    id: Option<Value>,
) -> Result<StreamableHttpPostResponse> {
    match response {
        Ok(StreamableHttpPostResponse::Sse(stream, session)) => {
            let stream = stream.map(move |event| {
                event.map(|sse| {
                    let sse = typed_event(sse);
                    match &id {
                        Some(tag) => tag_event(sse, tag),
                        None => sse,
                    }
                })
            });
            Ok(StreamableHttpPostResponse::Sse(stream.boxed(), session))
        }
        other => other,
    }
}

/// `sse` with what rmcp's types would drop moved where they keep it
/// ([`wire`](crate::runtime::mcp::wire)).
fn typed_event(mut sse: Sse) -> Sse {
    if let Some(typed) = sse
        .data
        .as_deref()
        .and_then(|data| crate::runtime::mcp::wire::typed_line(data.as_bytes()))
    {
        sse.data = String::from_utf8(typed).ok();
    }
    sse
}

/// The id of `message`, as a tag, when it is a request.
fn call_tag(message: &ClientJsonRpcMessage) -> Option<Value> {
    match message {
        JsonRpcMessage::Request(r) => serde_json::to_value(&r.id).ok(),
        _ => None,
    }
}

/// `sse` with the tag in its message's `params._meta` when the message is a
/// request or a notification of the server (progress is routed by its
/// token already; answers need no tag).
fn tag_event(mut sse: Sse, tag: &Value) -> Sse {
    let Some(data) = sse.data.as_deref().filter(|d| d.contains("\"method\"")) else {
        return sse;
    };
    let Ok(mut message) = serde_json::from_str::<Value>(data) else {
        return sse;
    };
    let Some(object) = message.as_object_mut() else {
        return sse;
    };
    match object.get("method").and_then(Value::as_str) {
        None | Some("notifications/progress") => return sse,
        Some(_) => {}
    }
    let params = object
        .entry("params")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(meta) = params.as_object_mut().map(|p| {
        p.entry("_meta")
            .or_insert_with(|| Value::Object(Default::default()))
    }) else {
        return sse;
    };
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(
            crate::runtime::mcp::client::CALL_TAG.to_owned(),
            tag.clone(),
        );
        sse.data = Some(message.to_string());
    }
    sse
}

impl StreamableHttpClient for WatchedClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse> {
        let mut custom_headers = custom_headers;
        let session_id = self.fit(Some(&message), session_id, &mut custom_headers);
        let tag = call_tag(&message);
        let result = self
            .authorized(auth_header, work_id(&message), |auth| {
                self.inner.post_message(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    auth,
                    custom_headers.clone(),
                )
            })
            .await;
        tagged(result, tag)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse> {
        let mut custom_headers = custom_headers;
        let session_id = self.fit(Some(&message), session_id, &mut custom_headers);
        let tag = call_tag(&message);
        let result = self
            .authorized(auth_header, work_id(&message), |auth| {
                self.inner.post_message_with_max_sse_event_size(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    auth,
                    custom_headers.clone(),
                    max_sse_event_size,
                )
            })
            .await;
        tagged(result, tag)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse> {
        let mut custom_headers = custom_headers;
        let session_id = self.fit(Some(&message), session_id, &mut custom_headers);
        let tag = call_tag(&message);
        let result = self
            .authorized(auth_header, work_id(&message), |auth| {
                self.inner.post_message_with_response_limits(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    auth,
                    custom_headers.clone(),
                    limits,
                )
            })
            .await;
        tagged(result, tag)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<()> {
        let mut custom_headers = custom_headers;
        self.fit(None, None, &mut custom_headers);
        // Closing: a failure here says nothing about a session we are ending.
        let auth = match &self.source {
            Some(source) => source.bearer().await,
            None => auth_header,
        };
        self.inner
            .delete_session(uri, session_id, auth, custom_headers)
            .await
            .map_err(without_url)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, std::result::Result<Sse, SseError>>> {
        let mut custom_headers = custom_headers;
        let session_id = self.fit(None, session_id, &mut custom_headers);
        self.authorized(auth_header, None, |auth| {
            self.inner.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                auth,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, std::result::Result<Sse, SseError>>> {
        let mut custom_headers = custom_headers;
        let session_id = self.fit(None, session_id, &mut custom_headers);
        self.authorized(auth_header, None, |auth| {
            self.inner.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                auth,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}

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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use futures::stream::BoxStream;
use reqwest::StatusCode;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde_json::Value;
use sse_stream::Sse;

use super::{Loss, SessionWatch, error_chain};

type Result<T> = std::result::Result<T, StreamableHttpError<reqwest::Error>>;

/// A reqwest client that reports lost sessions to a [`SessionWatch`].
#[derive(Clone, Debug)]
pub struct WatchedClient {
    inner: reqwest::Client,
    watch: SessionWatch,
    /// The session's protocol version, as its own requests carried it.
    session_version: Arc<Mutex<Option<HeaderValue>>>,
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
    pub fn new(inner: reqwest::Client, watch: SessionWatch) -> WatchedClient {
        WatchedClient {
            inner,
            watch,
            session_version: Arc::default(),
        }
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

/// `response`, its events tagged when it is the event stream of request
/// `id` (see the module doc).
fn tagged(
    response: Result<StreamableHttpPostResponse>,
    id: Option<Value>,
) -> Result<StreamableHttpPostResponse> {
    match (response, id) {
        (Ok(StreamableHttpPostResponse::Sse(stream, session)), Some(tag)) => {
            let stream = stream.map(move |event| event.map(|sse| tag_event(sse, &tag)));
            Ok(StreamableHttpPostResponse::Sse(stream.boxed(), session))
        }
        (other, _) => other,
    }
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
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        tagged(self.observe(result), tag)
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
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        tagged(self.observe(result), tag)
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
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        tagged(self.observe(result), tag)
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
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
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
        let result = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        self.observe(result)
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
        let result = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.observe(result)
    }
}

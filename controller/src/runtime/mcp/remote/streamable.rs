//! The streamable-HTTP side: reqwest, as rmcp drives it, with every answer
//! looked at for a lost session ([`SessionWatch`]).
//!
//! rmcp's streamable-HTTP worker keeps its failures to itself: a 404 on the
//! background SSE stream's reconnect is only logged, and a 404 on a POST is
//! answered by a silent re-initialization. Wrapping the HTTP client is the one
//! place that sees every request — POSTs (ping, lists, calls) and the GET
//! stream's reconnects — so that is where a lost session is noticed.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use reqwest::StatusCode;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use super::{Loss, SessionWatch, error_chain};

type Result<T> = std::result::Result<T, StreamableHttpError<reqwest::Error>>;

/// A reqwest client that reports lost sessions to a [`SessionWatch`].
#[derive(Clone, Debug)]
pub struct WatchedClient {
    inner: reqwest::Client,
    watch: SessionWatch,
}

impl WatchedClient {
    pub fn new(inner: reqwest::Client, watch: SessionWatch) -> WatchedClient {
        WatchedClient { inner, watch }
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
        let result = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.observe(result)
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
        self.observe(result)
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
        self.observe(result)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<()> {
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

//! HTTP for the registry commands: one reqwest client (the same rustls
//! roots as remote MCP servers), a timeout per request, bodies read up to a
//! bound, and failures said as what a user can act on (unreachable, which
//! status, too large).

use std::time::Duration;

use crate::runtime::mcp::remote::tls::{RootSources, build_client};

/// The largest JSON document read (a registry page, a packument).
pub const MAX_JSON: usize = 64 * 1024 * 1024;
/// The largest file downloaded (a wheel, a bundle).
pub const MAX_FILE: usize = 512 * 1024 * 1024;

/// Why a request failed. Messages read after "failed to".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("reach {url}: {why}")]
    Unreachable { url: String, why: String },
    #[error("get {url}: the server answered {status}")]
    Status { url: String, status: u16 },
    #[error("get {url}: the answer is larger than {limit} bytes")]
    TooLarge { url: String, limit: usize },
    #[error("set up HTTP: {0}")]
    Client(String),
}

impl HttpError {
    /// The HTTP status, when the server answered one.
    pub fn status(&self) -> Option<u16> {
        match self {
            HttpError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// An answer: its headers and body.
#[derive(Debug)]
pub struct Answer {
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

/// The registry commands' HTTP client.
#[derive(Debug, Clone)]
pub struct Http {
    client: reqwest::Client,
    timeout: Duration,
}

impl Http {
    /// A client whose every request gives up after `timeout`.
    pub fn new(timeout: Duration) -> Result<Http, HttpError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client =
            build_client(&RootSources::from_env()).map_err(|e| HttpError::Client(e.to_string()))?;
        Ok(Http { client, timeout })
    }

    /// `GET url` with `accept` and `headers`; a non-2xx answer is an error.
    pub async fn get(
        &self,
        url: &str,
        accept: &str,
        headers: &[(&str, String)],
        limit: usize,
    ) -> Result<Answer, HttpError> {
        let unreachable = |why: String| HttpError::Unreachable {
            url: url.to_owned(),
            why,
        };
        let mut request = self
            .client
            .get(url)
            .timeout(self.timeout)
            .header(reqwest::header::ACCEPT, accept)
            .header(
                reqwest::header::USER_AGENT,
                concat!("steward/", env!("CARGO_PKG_VERSION")),
            );
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| unreachable(describe(&e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(HttpError::Status {
                url: url.to_owned(),
                status: status.as_u16(),
            });
        }
        let headers = response.headers().clone();
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| unreachable(describe(&e)))?
        {
            if body.len() + chunk.len() > limit {
                return Err(HttpError::TooLarge {
                    url: url.to_owned(),
                    limit,
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Answer { headers, body })
    }

    /// `HEAD`-free probe for a header: `GET` answered with headers only
    /// (an OCI manifest is small), keeping the 401's `WWW-Authenticate`.
    pub async fn get_raw(
        &self,
        url: &str,
        accept: &str,
        headers: &[(&str, String)],
    ) -> Result<(u16, reqwest::header::HeaderMap), HttpError> {
        let mut request = self
            .client
            .get(url)
            .timeout(self.timeout)
            .header(reqwest::header::ACCEPT, accept);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let response = request.send().await.map_err(|e| HttpError::Unreachable {
            url: url.to_owned(),
            why: describe(&e),
        })?;
        Ok((response.status().as_u16(), response.headers().clone()))
    }
}

/// A reqwest error as a phrase (its chain, without the URL it repeats).
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "no answer within the timeout".to_owned();
    }
    let mut out = if e.is_connect() {
        "cannot connect".to_owned()
    } else {
        "the connection failed".to_owned()
    };
    let mut source = std::error::Error::source(e);
    let mut last = String::new();
    while let Some(s) = source {
        let text = s.to_string();
        if text != last {
            out.push_str(": ");
            out.push_str(&text);
            last = text;
        }
        source = s.source();
    }
    out
}

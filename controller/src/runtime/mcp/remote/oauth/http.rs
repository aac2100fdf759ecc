//! The HTTP side of signing in: a pair of clients on Steward's TLS roots
//! (one follows redirects, one does not), given to rmcp as its
//! [`OAuthHttpClient`] for discovery and the code exchange, and the
//! requests Steward makes itself: the token endpoint's refresh and device
//! grants ([`token_request`]) with the client's registered authentication,
//! and JSON posts (registration, device authorization).
//!
//! Answers are bounded (1 MiB); errors never carry a URL (its query may be
//! a credential) nor a body beyond the standard `error` fields.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt as _;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use rmcp::transport::auth::{
    OAuthHttpClient, OAuthHttpClientError, OAuthHttpClientFuture, OAuthHttpRedirectPolicy,
    OAuthHttpRequest,
};
use serde_json::Value;

use super::store::AuthMethod;
use crate::runtime::mcp::remote::tls::{RootSources, TlsError, build_client_with};

/// How long one OAuth request may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read.
const MAX_BODY: usize = 1024 * 1024;

/// Steward's OAuth HTTP clients.
#[derive(Debug, Clone)]
pub struct OAuthHttp {
    follow: reqwest::Client,
    stop: reqwest::Client,
}

/// The process's OAuth clients (built on first use, off the async threads).
pub async fn clients() -> Result<Arc<OAuthHttp>, TlsError> {
    static CLIENTS: OnceLock<Result<Arc<OAuthHttp>, TlsError>> = OnceLock::new();
    if let Some(clients) = CLIENTS.get() {
        return clients.clone();
    }
    let init = || {
        CLIENTS
            .get_or_init(|| {
                let _ = rustls::crypto::ring::default_provider().install_default();
                let sources = RootSources::from_env();
                let follow = build_client_with(&sources, |b| b.timeout(TIMEOUT))?;
                let stop = build_client_with(&sources, |b| {
                    b.timeout(TIMEOUT)
                        .redirect(reqwest::redirect::Policy::none())
                })?;
                Ok(Arc::new(OAuthHttp { follow, stop }))
            })
            .clone()
    };
    tokio::task::spawn_blocking(init)
        .await
        .unwrap_or_else(|error| Err(TlsError::Client(error.to_string())))
}

impl OAuthHttp {
    /// The client that does not follow redirects (token requests).
    pub fn no_redirects(&self) -> &reqwest::Client {
        &self.stop
    }
}

/// Reads at most [`MAX_BODY`] of `response`.
async fn bounded_body(response: reqwest::Response) -> Result<Vec<u8>, HttpError> {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| HttpError::Send(e.without_url()))?;
        if body.len() + chunk.len() > MAX_BODY {
            return Err(HttpError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

impl OAuthHttpClient for OAuthHttp {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        Box::pin(async move {
            let client = match request.redirect_policy {
                OAuthHttpRedirectPolicy::Stop => &self.stop,
                _ => &self.follow,
            };
            let request = reqwest::Request::try_from(request.request)
                .map_err(|e| Box::new(e.without_url()) as OAuthHttpClientError)?;
            let response = client
                .execute(request)
                .await
                .map_err(|e| Box::new(e.without_url()) as OAuthHttpClientError)?;
            let mut builder = oauth2_http::Response::builder()
                .status(response.status())
                .version(response.version());
            for (name, value) in response.headers() {
                builder = builder.header(name, value);
            }
            let body = bounded_body(response)
                .await
                .map_err(|e| Box::new(e) as OAuthHttpClientError)?;
            builder
                .body(body)
                .map_err(|e| Box::new(e) as OAuthHttpClientError)
        })
    }
}

/// rmcp's OAuth requests and responses are `http` 1.x types.
use http as oauth2_http;

/// An HTTP exchange with an OAuth endpoint failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("reach the server")]
    Send(#[source] reqwest::Error),
    #[error("read the answer: it is larger than 1 MiB")]
    TooLarge,
    /// The endpoint answered an OAuth error (RFC 6749 §5.2).
    #[error("the server refused ({status}: {error}{})", description.as_ref().map(|d| format!(": {d}")).unwrap_or_default())]
    Refused {
        status: u16,
        error: String,
        description: Option<String>,
    },
    #[error("the server answered HTTP {0}")]
    Status(u16),
    #[error("read the answer: {0}")]
    BadAnswer(String),
}

impl HttpError {
    /// The OAuth error code, if the server sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            HttpError::Refused { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The authorization server will not accept the grant or the client
    /// again: only the user (a new sign-in) helps, retrying does not.
    pub fn needs_user(&self) -> bool {
        matches!(
            self.code(),
            Some("invalid_grant" | "invalid_client" | "unauthorized_client" | "invalid_scope")
        )
    }
}

/// How the client authenticates at the token endpoint.
#[derive(Clone, Copy)]
pub struct ClientAuth<'a> {
    pub client_id: &'a str,
    pub client_secret: Option<&'a str>,
    pub method: AuthMethod,
}

impl std::fmt::Debug for ClientAuth<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientAuth")
            .field("client_id", &self.client_id)
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

/// A token endpoint's successful answer (RFC 6749 §5.1).
#[derive(Clone)]
pub struct TokenAnswer {
    pub access_token: String,
    pub token_type: String,
    pub expires_in: Option<u64>,
    pub refresh_token: Option<String>,
    pub scope: Option<String>,
}

impl std::fmt::Debug for TokenAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenAnswer")
            .field("token_type", &self.token_type)
            .field("expires_in", &self.expires_in)
            .field("refresh_token", &self.refresh_token.is_some())
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// The `error` / `error_description` of an OAuth error answer (JSON).
fn refusal(status: u16, body: &[u8]) -> HttpError {
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match json.get("error").and_then(Value::as_str) {
        Some(error) => HttpError::Refused {
            status,
            error: error.to_owned(),
            description: json
                .get("error_description")
                .and_then(Value::as_str)
                .map(str::to_owned),
        },
        None => HttpError::Status(status),
    }
}

/// Percent-encoding of a client id or secret for HTTP Basic (RFC 6749 §2.3.1).
fn form_encoded(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// A token request (`grant_type` and the rest in `form`) to `endpoint`,
/// authenticated as `auth` says; no redirects followed.
pub async fn token_request(
    http: &OAuthHttp,
    endpoint: &str,
    form: &[(&str, &str)],
    auth: ClientAuth<'_>,
) -> Result<TokenAnswer, HttpError> {
    let json = post_form(http, endpoint, form, auth).await?;
    let text = |key: &str| {
        json.get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let access_token = text("access_token")
        .ok_or_else(|| HttpError::BadAnswer("it has no access_token".to_owned()))?;
    let expires_in = match json.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_u64().or_else(|| n.as_f64().map(|f| f.max(0.0) as u64)),
        Some(Value::String(s)) => s.trim().parse().ok(),
        Some(_) => None,
    };
    Ok(TokenAnswer {
        access_token,
        token_type: text("token_type").unwrap_or_else(|| "Bearer".to_owned()),
        expires_in,
        refresh_token: text("refresh_token"),
        scope: text("scope"),
    })
}

/// The JSON body of a 2xx `response`; else the server's refusal.
async fn json_answer(response: reqwest::Response) -> Result<Value, HttpError> {
    let status = response.status().as_u16();
    let body = bounded_body(response).await?;
    if !(200..300).contains(&status) {
        return Err(refusal(status, &body));
    }
    serde_json::from_slice(&body).map_err(|e| HttpError::BadAnswer(format!("not JSON ({e})")))
}

/// POSTs `body` (a JSON object) to `endpoint`; the JSON answer.
pub async fn post_json(http: &OAuthHttp, endpoint: &str, body: &Value) -> Result<Value, HttpError> {
    let response = http
        .stop
        .post(endpoint)
        .header(ACCEPT, "application/json")
        .json(body)
        .send()
        .await
        .map_err(|e| HttpError::Send(e.without_url()))?;
    json_answer(response).await
}

/// The form of a request authenticated as `auth` (built apart: the
/// serializer is not `Send`).
fn form_body(form: &[(&str, &str)], auth: ClientAuth<'_>) -> String {
    let mut body = url::form_urlencoded::Serializer::new(String::new());
    for (key, value) in form {
        body.append_pair(key, value);
    }
    match (auth.method, auth.client_secret) {
        (AuthMethod::ClientSecretBasic, Some(_)) => {}
        (AuthMethod::ClientSecretPost, Some(secret)) => {
            body.append_pair("client_id", auth.client_id);
            body.append_pair("client_secret", secret);
        }
        _ => {
            body.append_pair("client_id", auth.client_id);
        }
    }
    body.finish()
}

/// POSTs a form to `endpoint` (a token or device authorization request)
/// with the client's authentication; the JSON answer.
pub async fn post_form(
    http: &OAuthHttp,
    endpoint: &str,
    form: &[(&str, &str)],
    auth: ClientAuth<'_>,
) -> Result<Value, HttpError> {
    let mut request = http
        .stop
        .post(endpoint)
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(ACCEPT, "application/json")
        .body(form_body(form, auth));
    if let (AuthMethod::ClientSecretBasic, Some(secret)) = (auth.method, auth.client_secret) {
        request = request.basic_auth(form_encoded(auth.client_id), Some(form_encoded(secret)));
    }
    let response = request
        .send()
        .await
        .map_err(|e| HttpError::Send(e.without_url()))?;
    json_answer(response).await
}

/// `s` split into scopes (space-separated), without repeats, in order.
pub fn scope_list(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for scope in s.split_whitespace() {
        if !out.iter().any(|have| have == scope) {
            out.push(scope.to_owned());
        }
    }
    out
}

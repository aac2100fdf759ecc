//! Signing in: the MCP authorization flow (2025-11-25, 2026-07-28), from a
//! server's 401 to a stored token.
//!
//! rmcp's `AuthorizationManager` does the parts it does as the spec says:
//! discovery (protected resource metadata from the challenge's
//! `resource_metadata`, else the well-known URLs in the spec's order;
//! authorization server metadata by RFC 8414 then OpenID discovery, its
//! issuer checked; the resource kept exactly as published), the initial
//! scope choice (the challenge's, else `scopes_supported`, else none;
//! `offline_access` when the authorization server lists it), the
//! authorization request (PKCE S256, `state`, `resource`) and the code
//! exchange (`resource`, the PKCE verifier, RFC 9207 `iss` compared as a
//! plain string). Steward tightens it where the spec is stricter and adds
//! what it lacks:
//! - no legacy endpoint guessing (2025-03-26): a server that publishes no
//!   metadata cannot be signed in to;
//! - PKCE must be advertised: metadata without `S256` in
//!   `code_challenge_methods_supported` is refused before anything is sent;
//! - the client: a pre-registered one from the entry, else a registration
//!   kept from an earlier sign-in, else a Client ID Metadata Document, else
//!   Dynamic Client Registration ([`super::register`]), authenticating at the
//!   token endpoint as registered (rmcp would pick from the metadata);
//! - step-up: a sign-in after a `403 insufficient_scope` asks for the union
//!   of the granted and the challenged scopes, at most [`MAX_STEP_UPS`]
//!   times in a row;
//! - the device authorization grant (RFC 8628, [`super::device`]), the
//!   loopback callback ([`super::callback`]) and storage ([`super::store`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use reqwest::header::{ACCEPT, CONTENT_TYPE, WWW_AUTHENTICATE};
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationMetadata,
    AuthorizationMetadataSource, CredentialStore, OAuthClientConfig, OAuthTokenResponse,
    StoredCredentials,
};
use serde_json::{Value, json};

use super::OAuthEntry;
use super::callback::{Redirect, RedirectError};
use super::http::{HttpError, OAuthHttp, scope_list};
use super::register::{self, ChosenClient};
use super::store::{AuthMethod, OAuthStore, StoreError, TokenRecord, now_secs};

/// Sign-ins for more scope in a row that did not help (the server still
/// answers `insufficient_scope`): then Steward stops asking.
/// With the first sign-in, three authorization requests in a row at most.
pub const MAX_STEP_UPS: u32 = 2;

/// The fields of an rmcp token response (an `oauth2` type, read through
/// its serialized form).
struct Issued {
    access_token: String,
    token_type: String,
    refresh_token: Option<String>,
    expires_in: Option<u64>,
}

fn issued(token: &OAuthTokenResponse) -> Option<Issued> {
    let json = serde_json::to_value(token).ok()?;
    let text = |key: &str| json.get(key).and_then(Value::as_str).map(str::to_owned);
    Some(Issued {
        access_token: text("access_token")?,
        token_type: match text("token_type") {
            Some(t) if t.eq_ignore_ascii_case("bearer") => "Bearer".to_owned(),
            Some(t) => t,
            None => "Bearer".to_owned(),
        },
        refresh_token: text("refresh_token"),
        expires_in: json.get("expires_in").and_then(Value::as_u64),
    })
}

/// Why a sign-in could not be completed. Messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error("reach {url}: {source}")]
    Probe {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("discover how to sign in to {url}: {reason}")]
    Discovery { url: String, reason: String },
    #[error(
        "sign in to {url}: the server publishes no OAuth metadata (no protected resource metadata and no authorization server metadata), so there is nothing to sign in to; if it needs a token, set it in the entry's headers"
    )]
    NoMetadata { url: String },
    #[error(
        "sign in at {issuer}: the authorization server does not advertise PKCE with S256 (code_challenge_methods_supported: {advertised}), which the MCP authorization spec requires; Steward will not sign in without it"
    )]
    NoPkce { issuer: String, advertised: String },
    #[error("sign in at {issuer}: its metadata has no issuer identifier")]
    NoIssuer { issuer: String },
    #[error("{0}")]
    Register(#[from] register::RegisterError),
    #[error("{0}")]
    Redirect(#[from] RedirectError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("build the authorization request: {0}")]
    Authorize(String),
    #[error("sign in: the authorization server answered with error {error}{}", description.as_ref().map(|d| format!(": {d}")).unwrap_or_default())]
    Denied {
        error: String,
        description: Option<String>,
    },
    #[error("read the redirect: {0}")]
    BadRedirect(String),
    #[error(
        "sign in: the redirect's state does not match this sign-in (it belongs to another, or was forged); nothing was exchanged"
    )]
    WrongState,
    #[error("sign in: {0}")]
    Exchange(String),
    #[error(
        "sign in: no redirect arrived in time (the browser did not reach the loopback callback)"
    )]
    TimedOut,
    #[error(
        "sign in at {issuer}: the authorization server does not offer the device authorization grant (no device_authorization_endpoint); use --paste instead"
    )]
    NoDeviceGrant { issuer: String },
    #[error("sign in with a device code: {0}")]
    Device(String),
    #[error("sign in with a device code: {0}")]
    DeviceHttp(#[source] HttpError),
    #[error(
        "sign in to {url}: the server still refuses the token for lack of scope ({scopes}) after {count} sign-ins for more, so Steward stopped asking; check what the account may do at the authorization server, then start over with `steward auth logout {server}`"
    )]
    StepUpLimit {
        url: String,
        server: String,
        count: u32,
        scopes: String,
    },
}

impl SignInError {
    /// The registration the authorization server rejected: forget it so the
    /// next sign-in registers again.
    fn client_rejected(&self) -> bool {
        matches!(self, SignInError::Exchange(text) if text.contains("invalid_client"))
    }
}

/// What a sign-in is for.
#[derive(Debug, Clone)]
pub struct Target {
    /// The entry's name (the callback port derives from it).
    pub server: String,
    /// The MCP server's URL (resolved: it may carry a secret).
    pub url: String,
    /// `true` for the legacy SSE transport (`url`): probed with a GET.
    pub sse: bool,
    /// The entry's `oauth` settings, secrets resolved.
    pub oauth: OAuthEntry,
    /// `steward.oauth.clientMetadataUrl` (user or system settings).
    pub client_metadata_url: Option<String>,
    /// A `WWW-Authenticate` challenge already seen (a 403's, for step-up).
    pub challenge: Option<String>,
}

/// Captures what rmcp saves after the code exchange.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Option<StoredCredentials>>>);

#[async_trait::async_trait]
impl CredentialStore for Captured {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(crate::support::sync::lock(&self.0).clone())
    }
    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        *crate::support::sync::lock(&self.0) = Some(credentials);
        Ok(())
    }
    async fn clear(&self) -> Result<(), AuthError> {
        *crate::support::sync::lock(&self.0) = None;
        Ok(())
    }
}

/// A sign-in discovered and ready: its client is chosen and its
/// authorization request built.
pub struct Prepared {
    manager: AuthorizationManager,
    captured: Captured,
    pub target: Target,
    pub metadata: AuthorizationMetadata,
    pub issuer: String,
    /// The resource, exactly as its protected resource metadata published it.
    pub resource: String,
    pub redirect: Redirect,
    pub client: ChosenClient,
    pub scopes: Vec<String>,
    /// The authorization request to open (PKCE, state, resource).
    pub authorization_url: String,
    state: String,
    /// For a step-up, the step-ups in a row before this one.
    step_ups: Option<u32>,
    http: Arc<OAuthHttp>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("issuer", &self.issuer)
            .field("resource", &self.resource)
            .field("client", &self.client)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// The `WWW-Authenticate` of the server's answer to an unauthenticated
/// first request (a streamable-HTTP `initialize`, an SSE `GET`), if it
/// asked for authorization.
async fn probe(http: &OAuthHttp, target: &Target) -> Result<Option<String>, SignInError> {
    let request = if target.sse {
        http.no_redirects()
            .get(&target.url)
            .header(ACCEPT, "text/event-stream")
    } else {
        let initialize = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "steward", "version": env!("CARGO_PKG_VERSION")},
            },
        });
        http.no_redirects()
            .post(&target.url)
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(initialize.to_string())
    };
    let response = request.send().await.map_err(|source| SignInError::Probe {
        url: crate::runtime::mcp::describe::redact_url(&target.url),
        source: source.without_url(),
    })?;
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get_all(WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.to_ascii_lowercase().starts_with("bearer"))
        .map(str::to_owned);
    Ok(challenge.filter(|_| matches!(status, 401 | 403)))
}

/// The value of query parameter `key` of `url`.
fn query_param(url: &str, key: &str) -> Option<String> {
    url::Url::parse(url).ok().and_then(|u| {
        u.query_pairs()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.into_owned())
    })
}

fn shown(url: &str) -> String {
    crate::runtime::mcp::describe::redact_url(url)
}

/// The metadata rmcp should configure its client from: the methods list
/// narrowed to the one the client was registered with, since rmcp picks
/// its token endpoint authentication from the metadata alone.
fn for_method(metadata: &AuthorizationMetadata, method: AuthMethod) -> AuthorizationMetadata {
    let mut metadata = metadata.clone();
    metadata.additional_fields.insert(
        "token_endpoint_auth_methods_supported".to_owned(),
        json!([method.as_str()]),
    );
    metadata
}

/// The scopes of a first sign-in, or of a step-up (the union of what was
/// granted and what a 403 asked for), `offline_access` added when the
/// authorization server lists it.
async fn scopes_for(
    manager: &AuthorizationManager,
    metadata: &AuthorizationMetadata,
    previous: Option<&TokenRecord>,
) -> Vec<String> {
    match previous.filter(|p| !p.wanted_scopes.is_empty()) {
        Some(previous) => {
            let mut scopes = previous.scopes.clone();
            for scope in &previous.wanted_scopes {
                if !scopes.contains(scope) {
                    scopes.push(scope.clone());
                }
            }
            let offline = metadata
                .scopes_supported
                .as_ref()
                .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
            if offline && !scopes.iter().any(|s| s == "offline_access") {
                scopes.push("offline_access".to_owned());
            }
            scopes
        }
        None => manager.select_initial_scopes(&[]).await,
    }
}

/// Discovers how to sign in to `target`, chooses (or registers) the client
/// and builds the authorization request.
pub async fn prepare(
    store: &OAuthStore,
    http: Arc<OAuthHttp>,
    target: Target,
) -> Result<Prepared, SignInError> {
    let url = target.url.clone();
    // What the server asked Steward for last, else what it answers now.
    let challenge = match &target.challenge {
        Some(challenge) => Some(challenge.clone()),
        None => match store.challenge(&url).await? {
            Some(challenge) => Some(challenge),
            None => probe(&http, &target).await?,
        },
    };
    let discovery = |reason: String| SignInError::Discovery {
        url: shown(&url),
        reason,
    };
    let mut manager = AuthorizationManager::new_with_oauth_http_client(url.as_str(), http.clone())
        .await
        .map_err(|e| discovery(e.to_string()))?;
    let captured = Captured::default();
    manager.set_credential_store(captured.clone());
    let resolution = manager
        .resolve_metadata_from_challenge(challenge.as_deref())
        .await
        .map_err(|e| discovery(crate::runtime::mcp::describe::redact_urls(&e.to_string())))?;
    if resolution.source == AuthorizationMetadataSource::LegacyEndpointFallback {
        return Err(SignInError::NoMetadata { url: shown(&url) });
    }
    let metadata = resolution.metadata;
    let issuer = metadata
        .issuer
        .clone()
        .ok_or_else(|| SignInError::NoIssuer {
            issuer: shown(&metadata.authorization_endpoint),
        })?;
    let methods = metadata.code_challenge_methods_supported.as_deref();
    if !methods.is_some_and(|m| m.iter().any(|m| m == "S256")) {
        return Err(SignInError::NoPkce {
            issuer,
            advertised: methods.map_or_else(|| "absent".to_owned(), |m| format!("{m:?}")),
        });
    }
    manager.set_metadata(metadata.clone());
    let redirect = match &target.oauth.redirect_uri {
        Some(pinned) => Redirect::pinned(pinned)?,
        None => Redirect::derived(&target.server, &issuer),
    };
    let previous = store.token_for(&url, &target.oauth.account).await?;
    let previous = previous.filter(|p| p.issuer == issuer);
    let step_ups = previous
        .as_ref()
        .filter(|p| !p.wanted_scopes.is_empty())
        .map(|p| p.step_ups);
    if let Some(step_ups) = step_ups.filter(|n| *n >= MAX_STEP_UPS) {
        let scopes = previous
            .map(|p| p.wanted_scopes.join(" "))
            .unwrap_or_default();
        return Err(SignInError::StepUpLimit {
            url: shown(&url),
            server: target.server.clone(),
            count: step_ups,
            scopes,
        });
    }
    let scopes = scopes_for(&manager, &metadata, previous.as_ref()).await;
    let client = register::choose(
        store,
        &http,
        &register::Need {
            issuer: &issuer,
            metadata: &metadata,
            redirect_uri: &redirect.uri,
            oauth: &target.oauth,
            client_metadata_url: target.client_metadata_url.as_deref(),
            scopes: &scopes,
        },
    )
    .await?;
    manager.set_metadata(for_method(&metadata, client.method));
    let mut config = OAuthClientConfig::new(client.client_id.clone(), redirect.uri.clone())
        .with_scopes(scopes.clone());
    if let Some(secret) = &client.client_secret {
        config = config.with_client_secret(secret.clone());
    }
    manager
        .configure_client(config)
        .map_err(|e| SignInError::Authorize(e.to_string()))?;
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let authorization_url = manager
        .get_authorization_url(&scope_refs)
        .await
        .map_err(|e| SignInError::Authorize(e.to_string()))?;
    let state = query_param(&authorization_url, "state")
        .ok_or_else(|| SignInError::Authorize("the request has no state".to_owned()))?;
    let resource = query_param(&authorization_url, "resource").unwrap_or_else(|| url.clone());
    Ok(Prepared {
        manager,
        captured,
        target,
        metadata,
        issuer,
        resource,
        redirect,
        client,
        scopes,
        authorization_url,
        state,
        step_ups,
        http,
    })
}

/// What a redirect brought back.
#[derive(Debug)]
pub enum Redirected {
    /// This sign-in's code.
    Code(AuthorizationCallback),
    /// Another request (a reload, a forged one): keep waiting.
    NotOurs,
}

impl Prepared {
    /// Reads a redirect URL (the callback's, or one pasted): this sign-in's
    /// code, the authorization server's error, or not ours.
    pub fn read_redirect(&self, url: &str) -> Result<Redirected, SignInError> {
        let parsed = url::Url::parse(url.trim())
            .map_err(|e| SignInError::BadRedirect(format!("it is not a URL ({e})")))?;
        let pairs: HashMap<String, String> = parsed.query_pairs().into_owned().collect();
        if pairs.get("state") != Some(&self.state) {
            return Ok(Redirected::NotOurs);
        }
        if let Some(error) = pairs.get("error") {
            return Err(SignInError::Denied {
                error: error.clone(),
                description: pairs.get("error_description").cloned(),
            });
        }
        AuthorizationCallback::from_redirect_url(url.trim())
            .map(Redirected::Code)
            .map_err(|e| SignInError::BadRedirect(e.to_string()))
    }

    /// Exchanges the code of `callback` (checking `iss`) and stores the
    /// tokens.
    pub async fn finish(
        &self,
        store: &OAuthStore,
        callback: &AuthorizationCallback,
    ) -> Result<TokenRecord, SignInError> {
        if callback.csrf_token != self.state {
            return Err(SignInError::WrongState);
        }
        let exchanged = self
            .manager
            .exchange_code_for_token_with_issuer(
                &callback.code,
                &callback.csrf_token,
                callback.issuer.as_deref(),
            )
            .await;
        if let Err(error) = exchanged {
            let error = SignInError::Exchange(error.to_string());
            if error.client_rejected() && self.client.registered {
                let _ = store.remove_client(&self.issuer, &self.redirect.uri).await;
            }
            return Err(error);
        }
        let saved = crate::support::sync::lock(&self.captured.0).take();
        let saved = saved.and_then(|s| {
            let token = issued(s.token_response.as_ref()?)?;
            Some((token, s.granted_scopes))
        });
        let Some((token, granted)) = saved else {
            return Err(SignInError::Exchange(
                "the token endpoint's answer has no access token".to_owned(),
            ));
        };
        let record = self.record(
            token.access_token,
            token.token_type,
            token.refresh_token,
            token.expires_in,
            granted,
        );
        store.save_sign_in(&record).await?;
        Ok(record)
    }

    /// The record of tokens issued now to this sign-in's client.
    pub(super) fn record(
        &self,
        access_token: String,
        token_type: String,
        refresh_token: Option<String>,
        expires_in: Option<u64>,
        granted: Vec<String>,
    ) -> TokenRecord {
        let now = now_secs();
        TokenRecord {
            issuer: self.issuer.clone(),
            resource: self.resource.clone(),
            account: self.target.oauth.account.clone(),
            client_id: self.client.client_id.clone(),
            client_secret: self
                .client
                .registered
                .then(|| self.client.client_secret.clone())
                .flatten(),
            auth_method: self.client.method,
            token_endpoint: self.metadata.token_endpoint.clone(),
            authorization_endpoint: Some(self.metadata.authorization_endpoint.clone()),
            registration_endpoint: self.metadata.registration_endpoint.clone(),
            access_token,
            token_type,
            refresh_token,
            scopes: if granted.is_empty() {
                self.scopes.clone()
            } else {
                granted
            },
            expires_at: expires_in.map(|s| now.saturating_add(s)),
            obtained_at: now,
            // Asked for now; a server that still wants more says so again.
            wanted_scopes: Vec::new(),
            // Step-ups in a row: reset by the first call that succeeds.
            step_ups: self.step_ups.map_or(0, |n| n + 1),
        }
    }

    /// The device authorization endpoint, if the server offers the grant.
    pub fn device_endpoint(&self) -> Result<String, SignInError> {
        self.metadata
            .additional_fields
            .get("device_authorization_endpoint")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| SignInError::NoDeviceGrant {
                issuer: self.issuer.clone(),
            })
    }

    pub(super) fn http(&self) -> &OAuthHttp {
        &self.http
    }
}

/// Parses a `scope` answer, or keeps what was asked.
pub(super) fn granted_from(scope: Option<&str>, asked: &[String]) -> Vec<String> {
    scope.map(scope_list).unwrap_or_else(|| asked.to_vec())
}

/// Waits on `listener` for this sign-in's redirect (until `deadline`),
/// exchanges its code and stores the tokens; every arrival is answered
/// with a page saying how it went. Redirects of other sign-ins are turned
/// away and waited past.
pub async fn complete_on(
    prepared: &Prepared,
    store: &OAuthStore,
    listener: &mut super::callback::Listener,
    deadline: tokio::time::Instant,
) -> Result<TokenRecord, SignInError> {
    use super::callback::Page;
    let server = prepared.target.server.clone();
    loop {
        let arrival = match tokio::time::timeout_at(deadline, listener.arrivals.recv()).await {
            Ok(Some(arrival)) => arrival,
            Ok(None) | Err(_) => return Err(SignInError::TimedOut),
        };
        let page = |ok: bool, text: String| Page { ok, text };
        match prepared.read_redirect(&arrival.url) {
            Ok(Redirected::NotOurs) => {
                let _ = arrival.answer.send(page(
                    false,
                    "This page does not belong to the sign-in in progress; nothing was done."
                        .to_owned(),
                ));
            }
            Ok(Redirected::Code(callback)) => {
                let result = prepared.finish(store, &callback).await;
                let _ = arrival.answer.send(match &result {
                    Ok(_) => page(
                        true,
                        format!("Steward is signed in to {server}. You can close this tab."),
                    ),
                    Err(error) => page(false, format!("Steward failed to {error}.")),
                });
                return result;
            }
            Err(error) => {
                let _ = arrival
                    .answer
                    .send(page(false, format!("Steward failed to {error}.")));
                return Err(error);
            }
        }
    }
}

//! Which client signs in, in the MCP authorization spec's order:
//! 1. a pre-registered client from the entry (`oauth.clientId`, with
//!    `oauth.clientSecret` as a `${secret:NAME}` reference);
//! 2. the client Steward registered at this authorization server for this
//!    redirect URI before (kept in the store: not registered again — unless
//!    the sign-in asks for a scope that registration did not ask for, as a
//!    step-up can: authorization servers limit a client to the scopes it
//!    registered, RFC 7591 `scope`, so a new registration asks for them all
//!    and replaces it);
//! 3. a Client ID Metadata Document, when the authorization server
//!    advertises `client_id_metadata_document_supported` and the user or
//!    system settings name one (`steward.oauth.clientMetadataUrl`);
//! 4. Dynamic Client Registration (RFC 7591) as a native application, with
//!    the redirect URI, the authorization-code and refresh grants (and the
//!    device grant when the server offers it), asking for the token
//!    endpoint authentication the server supports — `none` first — and
//!    keeping what it answers.
//!
//! The token endpoint authentication is the one registered (a DCR answer's
//! `token_endpoint_auth_method`), else for a client with a secret the
//! metadata's first of `client_secret_basic`, `client_secret_post` (RFC
//! 8414's default is `client_secret_basic`), else `none`.

use rmcp::transport::auth::AuthorizationMetadata;
use serde_json::{Value, json};

use super::OAuthEntry;
use super::http::{HttpError, OAuthHttp, post_json};
use super::store::{AuthMethod, ClientRecord, OAuthStore, StoreError, now_secs};

/// The device grant's type (RFC 8628).
pub const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// Where the client came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientSource {
    /// `oauth.clientId` of the entry.
    Preregistered,
    /// Registered by an earlier sign-in.
    Kept,
    /// `steward.oauth.clientMetadataUrl` (the URL is the client id).
    MetadataDocument,
    /// Registered now.
    Registered,
}

/// The client a sign-in uses.
#[derive(Clone)]
pub struct ChosenClient {
    pub client_id: String,
    pub client_secret: Option<String>,
    pub method: AuthMethod,
    pub source: ClientSource,
    /// Registered by Steward (now or before): its secret is kept with the
    /// tokens for refreshes.
    pub registered: bool,
}

impl std::fmt::Debug for ChosenClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChosenClient")
            .field("client_id", &self.client_id)
            .field("secret", &self.client_secret.is_some())
            .field("method", &self.method)
            .field("source", &self.source)
            .finish()
    }
}

/// Why no client could be had. Messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error(
        "sign in at {issuer}: it offers no dynamic client registration (no registration_endpoint) and the entry names no client; register an OAuth client there with the redirect URI {redirect_uri} and set oauth.clientId (and oauth.clientSecret as ${{secret:NAME}})"
    )]
    NoRegistration {
        issuer: String,
        redirect_uri: String,
    },
    #[error("register Steward as a client at {issuer}: {source}")]
    Refused {
        issuer: String,
        #[source]
        source: HttpError,
    },
    #[error("register Steward as a client at {issuer}: the answer has no client_id")]
    NoClientId { issuer: String },
    #[error(
        "use steward.oauth.clientMetadataUrl {0:?}: a Client ID Metadata Document is an https URL with a path"
    )]
    BadMetadataUrl(String),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// What the choice depends on.
#[derive(Debug)]
pub struct Need<'a> {
    pub issuer: &'a str,
    pub metadata: &'a AuthorizationMetadata,
    pub redirect_uri: &'a str,
    pub oauth: &'a OAuthEntry,
    pub client_metadata_url: Option<&'a str>,
    pub scopes: &'a [String],
}

/// The token endpoint authentication methods the metadata lists (RFC 8414's
/// default when it lists none).
fn supported_methods(metadata: &AuthorizationMetadata) -> Vec<String> {
    metadata
        .additional_fields
        .get("token_endpoint_auth_methods_supported")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|m| m.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_else(|| vec!["client_secret_basic".to_owned()])
}

/// The method of a client with (or without) a secret, from the metadata.
fn method_for(metadata: &AuthorizationMetadata, has_secret: bool) -> AuthMethod {
    if !has_secret {
        return AuthMethod::None;
    }
    let supported = supported_methods(metadata);
    if supported.iter().any(|m| m == "client_secret_basic") {
        AuthMethod::ClientSecretBasic
    } else if supported.iter().any(|m| m == "client_secret_post") {
        AuthMethod::ClientSecretPost
    } else {
        AuthMethod::ClientSecretBasic
    }
}

fn flag(metadata: &AuthorizationMetadata, key: &str) -> bool {
    metadata.additional_fields.get(key).and_then(Value::as_bool) == Some(true)
}

/// A Client ID Metadata Document URL: https, with a path.
fn valid_metadata_url(url: &str) -> bool {
    url::Url::parse(url)
        .is_ok_and(|u| u.scheme() == "https" && u.host_str().is_some() && u.path() != "/")
}

/// Chooses the client of a sign-in (see the module docs); registers one
/// when it must, and keeps it.
pub async fn choose(
    store: &OAuthStore,
    http: &OAuthHttp,
    need: &Need<'_>,
) -> Result<ChosenClient, RegisterError> {
    if let Some(client_id) = &need.oauth.client_id {
        return Ok(ChosenClient {
            client_id: client_id.clone(),
            client_secret: need.oauth.client_secret.clone(),
            method: method_for(need.metadata, need.oauth.client_secret.is_some()),
            source: ClientSource::Preregistered,
            registered: false,
        });
    }
    if let Some(kept) = store.client(need.issuer, need.redirect_uri).await?
        && covers(&kept, need.scopes)
    {
        return Ok(ChosenClient {
            client_id: kept.client_id,
            client_secret: kept.client_secret,
            method: kept.auth_method,
            source: ClientSource::Kept,
            registered: true,
        });
    }
    if let Some(url) = need.client_metadata_url
        && flag(need.metadata, "client_id_metadata_document_supported")
    {
        if !valid_metadata_url(url) {
            return Err(RegisterError::BadMetadataUrl(url.to_owned()));
        }
        return Ok(ChosenClient {
            client_id: url.to_owned(),
            client_secret: None,
            method: AuthMethod::None,
            source: ClientSource::MetadataDocument,
            registered: false,
        });
    }
    let record = register(http, need).await?;
    store.save_client(&record).await?;
    Ok(ChosenClient {
        client_id: record.client_id,
        client_secret: record.client_secret,
        method: record.auth_method,
        source: ClientSource::Registered,
        registered: true,
    })
}

/// Whether the kept registration `kept` asked for every scope of `scopes`
/// (one that asked for none took the server's default: kept as it is).
fn covers(kept: &ClientRecord, scopes: &[String]) -> bool {
    kept.scopes.is_empty() || scopes.iter().all(|s| kept.scopes.contains(s))
}

/// Dynamic Client Registration (RFC 7591).
async fn register(http: &OAuthHttp, need: &Need<'_>) -> Result<ClientRecord, RegisterError> {
    let Some(endpoint) = &need.metadata.registration_endpoint else {
        return Err(RegisterError::NoRegistration {
            issuer: need.issuer.to_owned(),
            redirect_uri: need.redirect_uri.to_owned(),
        });
    };
    let supported = supported_methods(need.metadata);
    let asked = ["none", "client_secret_basic", "client_secret_post"]
        .into_iter()
        .find(|m| supported.iter().any(|s| s == m))
        .and_then(AuthMethod::parse)
        .unwrap_or(AuthMethod::None);
    let mut grant_types = vec!["authorization_code", "refresh_token"];
    if need
        .metadata
        .additional_fields
        .contains_key("device_authorization_endpoint")
    {
        grant_types.push(DEVICE_GRANT);
    }
    let mut body = json!({
        "client_name": "Steward",
        "redirect_uris": [need.redirect_uri],
        "grant_types": grant_types,
        "response_types": ["code"],
        "token_endpoint_auth_method": asked.as_str(),
        "application_type": "native",
    });
    if !need.scopes.is_empty() {
        body["scope"] = json!(need.scopes.join(" "));
    }
    let answer =
        post_json(http, endpoint, &body)
            .await
            .map_err(|source| RegisterError::Refused {
                issuer: need.issuer.to_owned(),
                source,
            })?;
    let text = |key: &str| {
        answer
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let client_id = text("client_id").ok_or_else(|| RegisterError::NoClientId {
        issuer: need.issuer.to_owned(),
    })?;
    let client_secret = text("client_secret");
    let method = match text("token_endpoint_auth_method").and_then(|m| AuthMethod::parse(&m)) {
        Some(method) => method,
        None if client_secret.is_some() && asked == AuthMethod::None => {
            method_for(need.metadata, true)
        }
        None => asked,
    };
    // A method that needs a secret, without one, can only be `none`.
    let method = if client_secret.is_none() {
        AuthMethod::None
    } else {
        method
    };
    tracing::info!(issuer = %need.issuer, method = method.as_str(), "registered steward as an oauth client");
    Ok(ClientRecord {
        issuer: need.issuer.to_owned(),
        redirect_uri: need.redirect_uri.to_owned(),
        client_id,
        client_secret,
        auth_method: method,
        grant_types: grant_types.iter().map(|g| (*g).to_owned()).collect(),
        scopes: need.scopes.to_vec(),
        registered_at: now_secs(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(methods: Option<&[&str]>) -> AuthorizationMetadata {
        let mut m = AuthorizationMetadata::default();
        if let Some(methods) = methods {
            m.additional_fields.insert(
                "token_endpoint_auth_methods_supported".to_owned(),
                json!(methods),
            );
        }
        m
    }

    #[test]
    fn a_client_with_a_secret_prefers_basic_then_post() {
        assert_eq!(
            method_for(&metadata(None), true),
            AuthMethod::ClientSecretBasic
        );
        assert_eq!(
            method_for(&metadata(Some(&["client_secret_post"])), true),
            AuthMethod::ClientSecretPost
        );
        assert_eq!(
            method_for(
                &metadata(Some(&["client_secret_post", "client_secret_basic"])),
                true
            ),
            AuthMethod::ClientSecretBasic
        );
        assert_eq!(
            method_for(&metadata(Some(&["client_secret_post"])), false),
            AuthMethod::None
        );
    }

    #[test]
    fn a_kept_registration_serves_the_scopes_it_asked_for_only() {
        let scopes = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let kept = |asked: &[&str]| ClientRecord {
            issuer: "https://as.example".to_owned(),
            redirect_uri: "http://127.0.0.1:61000/callback".to_owned(),
            client_id: "c".to_owned(),
            client_secret: None,
            auth_method: AuthMethod::None,
            grant_types: vec![],
            scopes: scopes(asked),
            registered_at: 0,
        };
        let read = kept(&["mcp:read", "offline_access"]);
        assert!(covers(&read, &scopes(&["mcp:read"])));
        assert!(covers(&read, &scopes(&["offline_access", "mcp:read"])));
        assert!(!covers(&read, &scopes(&["mcp:read", "mcp:admin"])));
        // Asked for none (or kept before Steward noted it): the server's
        // default, reused as it is.
        assert!(covers(&kept(&[]), &scopes(&["mcp:admin"])));
    }

    #[test]
    fn a_metadata_document_url_is_https_with_a_path() {
        assert!(valid_metadata_url("https://example.com/client.json"));
        assert!(!valid_metadata_url("https://example.com/"));
        assert!(!valid_metadata_url("http://example.com/client.json"));
    }
}

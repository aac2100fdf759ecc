//! OAuth for remote servers, as Qwen Code 0.24 does it: Steward never runs
//! an authorization flow; it uses the token Qwen Code stored for the server
//! and refreshes it, so one `/mcp` authentication serves both.
//!
//! - **Store.** `HOME_DIR/mcp-oauth-tokens.json`: a JSON array of
//!   `{serverName, token: {accessToken, tokenType, refreshToken?, scope?,
//!   expiresAt?}, clientId?, tokenUrl?, mcpServerUrl?, updatedAt}` (times in
//!   ms since the epoch), mode 0600. (Qwen Code's encrypted store, chosen by
//!   `QWEN_CODE_FORCE_ENCRYPTED_FILE_STORAGE`, is not read.)
//! - **Which servers.** One with `oauth.enabled: true` needs a usable token:
//!   none → `AuthRequired`. Any other remote server uses a token stored under
//!   its name when there is a usable one, and connects without one otherwise.
//! - **Expiry.** A token is expired 5 minutes before its `expiresAt`. It is
//!   refreshed with a `refresh_token` grant at the stored `tokenUrl`, with the
//!   client id of the `oauth` config (else the stored one), its client
//!   secret, scopes and audiences, and the `resource` of the stored server
//!   URL; the new token is written back in Qwen Code's shape (a rotated
//!   refresh token replaces the old one). Unlike Qwen Code, a failed refresh
//!   does not delete the stored credentials: they are Qwen Code's too.
//! - **Never logged.** Tokens appear in no message, log line or `Debug` output.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{StatusCode, Url};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};
use steward_schema::resource::{McpServerSpec, Reason};

use super::{auth_required_message, error_chain};
use crate::runtime::start::StartError;
use crate::support::sync::lock;

/// The token store's file name under HOME_DIR.
pub const TOKENS_FILE: &str = "mcp-oauth-tokens.json";
/// A token this close to its expiry counts as expired (Qwen Code: 5 min).
const EXPIRY_MARGIN: Duration = Duration::from_secs(5 * 60);

/// The token store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("read the OAuth token store {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("parse the OAuth token store {}", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("write the OAuth token store {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// A refresh did not produce a token.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error("reach the token endpoint")]
    Send(#[source] reqwest::Error),
    #[error("the token endpoint refused the refresh ({0})")]
    Refused(String),
    #[error("the token endpoint answered HTTP {0}")]
    Status(StatusCode),
    #[error("the token endpoint's answer has no access_token")]
    NoAccessToken,
    #[error("the token endpoint's answer has an invalid expires_in")]
    BadExpiresIn,
}

impl RefreshError {
    /// The refresh token (or client) was refused: only a new authentication
    /// helps, retrying does not.
    fn is_refusal(&self) -> bool {
        matches!(
            self,
            RefreshError::Refused(_) | RefreshError::NoAccessToken | RefreshError::BadExpiresIn
        )
    }
}

/// One entry of the store, in Qwen Code's key order.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credential {
    pub server_name: String,
    pub token: Token,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_server_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Number>,
    /// Keys we do not know, kept as they are.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A stored token (Qwen Code's `OAuthToken`).
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Token {
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Number>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("server_name", &self.server_name)
            .field("token", &self.token)
            .field("token_url", &self.token_url.is_some())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("refresh_token", &self.refresh_token.is_some())
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

impl Token {
    /// Whether the token is expired (or about to be) at `now_ms`. A token
    /// without an expiry never expires.
    pub fn expired(&self, now_ms: u64) -> bool {
        let margin = EXPIRY_MARGIN.as_millis() as f64;
        self.expires_at
            .as_ref()
            .and_then(Number::as_f64)
            .is_some_and(|at| now_ms as f64 + margin >= at)
    }
}

/// An entry of the store file.
#[derive(Serialize)]
#[serde(untagged)]
enum Entry {
    Credential(Box<Credential>),
    /// Not a credential we understand: kept as it is.
    Other(Value),
}

/// Serializes read-modify-write cycles of the store within this process.
static STORE_LOCK: Mutex<()> = Mutex::new(());

/// Qwen Code's token file (or none, in unit tests).
#[derive(Debug, Clone)]
pub struct TokenStore {
    path: Option<PathBuf>,
}

impl TokenStore {
    /// The store at `path`.
    pub fn at(path: PathBuf) -> TokenStore {
        TokenStore { path: Some(path) }
    }

    /// The store of this process's HOME_DIR (`$QWEN_HOME`, else `~/.qwen`),
    /// resolved the way `steward run` resolves it. Unit tests get an empty
    /// store: they must never read the developer's real HOME_DIR.
    pub fn for_process() -> TokenStore {
        if cfg!(test) {
            return TokenStore { path: None };
        }
        let env = crate::support::paths::process_env();
        let home = match env.get("QWEN_HOME").filter(|v| !v.is_empty()) {
            Some(home) => Some(PathBuf::from(home)),
            None => env.get("HOME").map(|home| Path::new(home).join(".qwen")),
        };
        TokenStore {
            path: home.map(|home| home.join(TOKENS_FILE)),
        }
    }

    fn read_entries(path: &Path) -> Result<Vec<Value>, StoreError> {
        let text = match fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(StoreError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        serde_json::from_str(&text).map_err(|source| StoreError::Parse {
            path: path.to_owned(),
            source,
        })
    }

    /// The credential stored for `server` (the last one, as Qwen Code's map
    /// keeps the last). Entries that are not credentials are skipped.
    pub fn credential(&self, server: &str) -> Result<Option<Credential>, StoreError> {
        let Some(path) = &self.path else {
            return Ok(None);
        };
        let _serial = lock(&STORE_LOCK);
        Ok(Self::read_entries(path)?
            .into_iter()
            .rev()
            .filter_map(|entry| serde_json::from_value::<Credential>(entry).ok())
            .find(|credential| credential.server_name == server))
    }

    /// Replaces the entry of `credential.server_name` (or appends it), keeping
    /// every other entry; written atomically, mode 0600, 2-space indented as
    /// Qwen Code writes it.
    pub fn save(&self, credential: &Credential) -> Result<(), StoreError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let _serial = lock(&STORE_LOCK);
        let write_error = |source| StoreError::Write {
            path: path.clone(),
            source,
        };
        // Entries are written back through `Credential`, so every one keeps
        // Qwen Code's key order (a `Value` would sort the keys).
        let mut entries: Vec<Entry> = Self::read_entries(path)?
            .into_iter()
            .map(|entry| match Credential::deserialize(&entry) {
                Ok(credential) => Entry::Credential(Box::new(credential)),
                Err(_) => Entry::Other(entry),
            })
            .collect();
        let mut replaced = false;
        for entry in &mut entries {
            if let Entry::Credential(stored) = entry
                && stored.server_name == credential.server_name
            {
                **stored = credential.clone();
                replaced = true;
            }
        }
        if !replaced {
            entries.push(Entry::Credential(Box::new(credential.clone())));
        }
        let text = serde_json::to_string_pretty(&entries)
            .map_err(|error| write_error(io::Error::other(error)))?;
        crate::support::fs::write_atomically(path, text.as_bytes()).map_err(write_error)
    }
}

/// The `oauth` settings of an entry that matter here.
#[derive(Debug, Default)]
struct OAuthConfig {
    enabled: bool,
    client_id: Option<String>,
    client_secret: Option<String>,
    scopes: Vec<String>,
    audiences: Vec<String>,
}

impl OAuthConfig {
    fn of(spec: &McpServerSpec) -> OAuthConfig {
        let Some(oauth) = &spec.oauth else {
            return OAuthConfig::default();
        };
        let string = |key: &str| {
            oauth
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let strings = |key: &str| {
            oauth
                .get(key)
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|item| item.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        OAuthConfig {
            enabled: oauth.get("enabled").and_then(Value::as_bool) == Some(true),
            client_id: string("clientId"),
            client_secret: string("clientSecret"),
            scopes: strings("scopes"),
            audiences: strings("audiences"),
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn auth_required(name: &str, what: &str) -> StartError {
    StartError::new(Reason::AuthRequired, auth_required_message(name, what))
}

/// The access token to connect to `name` with: the stored one, refreshed
/// (and written back) when it expired. `None`: connect without one.
pub async fn access_token(
    store: &TokenStore,
    client: &reqwest::Client,
    name: &str,
    spec: &McpServerSpec,
) -> Result<Option<String>, StartError> {
    let config = OAuthConfig::of(spec);
    let stored = match store.credential(name) {
        Ok(stored) => stored,
        Err(error) if config.enabled => {
            return Err(StartError::failed(error_chain(&error)));
        }
        Err(error) => {
            tracing::warn!(server = %name, error = %error_chain(&error), "ignoring the OAuth token store");
            None
        }
    };
    let Some(stored) = stored else {
        return if config.enabled {
            Err(auth_required(
                name,
                "the server needs OAuth and no token is stored for it",
            ))
        } else {
            Ok(None)
        };
    };
    if !stored.token.expired(now_ms()) {
        tracing::debug!(server = %name, "using the stored OAuth token");
        return Ok(Some(stored.token.access_token));
    }
    // Qwen Code refreshes with the configured client id (or, for a server
    // without `oauth`, the stored one); the stored one also serves a
    // configured server whose client was registered dynamically.
    let client_id = config.client_id.clone().or(stored.client_id.clone());
    let (Some(refresh_token), Some(client_id), Some(token_url)) = (
        stored.token.refresh_token.clone(),
        client_id,
        stored.token_url.clone(),
    ) else {
        return if config.enabled {
            Err(auth_required(
                name,
                "the stored OAuth token expired and cannot be refreshed (no refresh token, client id or token URL)",
            ))
        } else {
            tracing::warn!(server = %name, "the stored OAuth token expired and cannot be refreshed; connecting without it");
            Ok(None)
        };
    };
    let request = RefreshRequest {
        token_url: &token_url,
        refresh_token: &refresh_token,
        client_id: &client_id,
        config: &config,
        mcp_server_url: stored.mcp_server_url.as_deref(),
    };
    match refresh(client, &request).await {
        Ok(fresh) => {
            let now = now_ms();
            let token = Token {
                access_token: fresh.access_token,
                token_type: Some(fresh.token_type),
                refresh_token: fresh.refresh_token.or(stored.token.refresh_token),
                scope: fresh.scope.or(stored.token.scope),
                expires_at: fresh
                    .expires_in
                    .map(|seconds| Number::from(now.saturating_add(seconds.saturating_mul(1000)))),
                extra: Map::new(),
            };
            let credential = Credential {
                server_name: name.to_owned(),
                token,
                client_id: Some(client_id),
                token_url: Some(token_url),
                mcp_server_url: stored.mcp_server_url,
                updated_at: Some(Number::from(now)),
                extra: stored.extra,
            };
            tracing::info!(server = %name, expires_in_s = ?fresh.expires_in, "refreshed the OAuth access token");
            if let Err(error) = store.save(&credential) {
                // The new token works now; the next refresh may not.
                tracing::warn!(server = %name, error = %error_chain(&error), "could not write back the refreshed OAuth token");
            }
            Ok(Some(credential.token.access_token))
        }
        Err(error) if !config.enabled => {
            tracing::warn!(server = %name, error = %error_chain(&error), "could not refresh the stored OAuth token; connecting without it");
            Ok(None)
        }
        Err(error) if error.is_refusal() => Err(auth_required(
            name,
            &format!("refresh the expired OAuth token: {}", error_chain(&error)),
        )),
        Err(error) => Err(StartError::failed(format!(
            "refresh the expired OAuth token: {}",
            error_chain(&error)
        ))),
    }
}

struct RefreshRequest<'a> {
    token_url: &'a str,
    refresh_token: &'a str,
    client_id: &'a str,
    config: &'a OAuthConfig,
    mcp_server_url: Option<&'a str>,
}

/// A token endpoint's answer.
struct Fresh {
    access_token: String,
    token_type: String,
    expires_in: Option<u64>,
    refresh_token: Option<String>,
    scope: Option<String>,
}

/// The OAuth refresh-token grant (RFC 6749), with Qwen Code's parameters.
async fn refresh(
    client: &reqwest::Client,
    request: &RefreshRequest<'_>,
) -> Result<Fresh, RefreshError> {
    let body = refresh_form(request);
    let response = client
        .post(request.token_url)
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(
            ACCEPT,
            "application/json, application/x-www-form-urlencoded",
        )
        .body(body)
        .send()
        .await
        .map_err(|error| RefreshError::Send(error.without_url()))?;
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|error| RefreshError::Send(error.without_url()))?;
    let fields = answer_fields(&text);
    let field = |key: &str| fields.get(key).cloned().filter(|v| !v.is_empty());
    if !status.is_success() {
        return Err(match field("error") {
            // Only the standard error fields are shown, never the body.
            Some(error) => RefreshError::Refused(match field("error_description") {
                Some(description) => format!("{status}: {error}: {description}"),
                None => format!("{status}: {error}"),
            }),
            None if status.is_client_error() => RefreshError::Refused(status.to_string()),
            None => RefreshError::Status(status),
        });
    }
    let access_token = field("access_token").ok_or(RefreshError::NoAccessToken)?;
    let expires_in = match field("expires_in") {
        None => None,
        Some(value) => Some(
            value
                .trim()
                .parse()
                .map_err(|_| RefreshError::BadExpiresIn)?,
        ),
    };
    Ok(Fresh {
        access_token,
        token_type: field("token_type").unwrap_or_else(|| "Bearer".to_owned()),
        expires_in,
        refresh_token: field("refresh_token"),
        scope: field("scope"),
    })
}

/// The form body of a refresh (built apart: the serializer is not `Send`).
fn refresh_form(request: &RefreshRequest<'_>) -> String {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", "refresh_token")
        .append_pair("refresh_token", request.refresh_token)
        .append_pair("client_id", request.client_id);
    let config = request.config;
    if let Some(secret) = &config.client_secret {
        form.append_pair("client_secret", secret);
    }
    if !config.scopes.is_empty() {
        form.append_pair("scope", &config.scopes.join(" "));
    }
    if !config.audiences.is_empty() {
        form.append_pair("audience", &config.audiences.join(" "));
    }
    if let Some(resource) = request.mcp_server_url.and_then(resource_parameter) {
        form.append_pair("resource", &resource);
    }
    form.finish()
}

/// A token endpoint's JSON object (its string and number fields) or
/// form-encoded answer, as a flat map.
fn answer_fields(text: &str) -> HashMap<String, String> {
    if let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text) {
        return object
            .into_iter()
            .filter_map(|(key, value)| match value {
                Value::String(s) => Some((key, s)),
                Value::Number(n) => Some((key, n.to_string())),
                _ => None,
            })
            .collect();
    }
    url::form_urlencoded::parse(text.as_bytes())
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect()
}

/// Qwen Code's `buildResourceParameter`: scheme, host, port and path of the
/// server URL, without a trailing slash (RFC 8707 resource indicator).
fn resource_parameter(server_url: &str) -> Option<String> {
    let url = Url::parse(server_url).ok()?;
    let path = match url.path() {
        "/" => "",
        path => path.strip_suffix('/').unwrap_or(path),
    };
    let host = &url[url::Position::BeforeHost..url::Position::AfterPort];
    Some(format!("{}://{host}{path}", url.scheme()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use serde_json::json;
    use steward_schema::resource::McpTransport;

    use super::*;

    const HOUR_MS: u64 = 3_600_000;

    fn spec(oauth: Option<Value>) -> McpServerSpec {
        McpServerSpec {
            transport: McpTransport::Http,
            http_url: Some("http://127.0.0.1:1/mcp".to_owned()),
            oauth: oauth.map(|value| value.as_object().unwrap().clone()),
            ..Default::default()
        }
    }

    fn client() -> reqwest::Client {
        use super::super::tls::{RootSources, build_client};
        build_client(&RootSources {
            system: true,
            ..RootSources::default()
        })
        .unwrap()
    }

    /// An entry as Qwen Code 0.24 writes it.
    fn qwen_entry(server: &str, access: &str, expires_at: u64, token_url: &str) -> Value {
        json!({
            "serverName": server,
            "token": {
                "accessToken": access,
                "tokenType": "Bearer",
                "refreshToken": format!("{server}-refresh"),
                "scope": "read",
                "expiresAt": expires_at,
            },
            "clientId": "stored-client",
            "tokenUrl": token_url,
            "mcpServerUrl": "http://mcp.example/v1/mcp/",
            "updatedAt": 1_700_000_000_000u64,
        })
    }

    fn write_store(path: &Path, entries: &[Value]) {
        fs::write(path, serde_json::to_string_pretty(entries).unwrap()).unwrap();
    }

    #[test]
    fn expiry_counts_five_minutes_early_and_no_expiry_never_expires() {
        let now = 1_000 * HOUR_MS;
        let token = |expires_at: Option<u64>| Token {
            access_token: String::new(),
            token_type: None,
            refresh_token: None,
            scope: None,
            expires_at: expires_at.map(Number::from),
            extra: Map::new(),
        };
        assert!(token(Some(now - 1)).expired(now));
        assert!(token(Some(now + 4 * 60_000)).expired(now));
        assert!(!token(Some(now + 6 * 60_000)).expired(now));
        assert!(!token(None).expired(now));
    }

    #[test]
    fn the_resource_parameter_is_qwen_codes() {
        assert_eq!(
            resource_parameter("https://mcp.example/v1/mcp/").as_deref(),
            Some("https://mcp.example/v1/mcp")
        );
        assert_eq!(
            resource_parameter("https://user:pw@mcp.example:8443/?q=1").as_deref(),
            Some("https://mcp.example:8443")
        );
        assert_eq!(resource_parameter("not a url"), None);
    }

    #[test]
    fn saving_replaces_one_entry_and_keeps_the_others_as_qwen_code_writes_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TOKENS_FILE);
        let other = json!({"serverName": "other", "token": {"accessToken": "o"}, "custom": [1]});
        write_store(
            &path,
            &[
                qwen_entry("mine", "old", 1, "http://t/token"),
                other.clone(),
            ],
        );
        let store = TokenStore::at(path.clone());
        let mut credential = store.credential("mine").unwrap().unwrap();
        assert_eq!(credential.token.access_token, "old");
        assert!(store.credential("absent").unwrap().is_none());
        credential.token.access_token = "new".to_owned();
        store.save(&credential).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        let entries: Vec<Value> = serde_json::from_str(&text).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0]["token"]["accessToken"], "new");
        assert_eq!(entries[1], other, "another server's entry changed");
        // JSON.stringify(tokens, null, 2), keys in Qwen Code's order.
        let mine = text.find("\"serverName\": \"mine\"").unwrap();
        let order: Vec<usize> = [
            "\"token\"",
            "\"accessToken\"",
            "\"tokenType\"",
            "\"refreshToken\"",
            "\"scope\"",
            "\"expiresAt\"",
            "\"clientId\"",
            "\"tokenUrl\"",
            "\"mcpServerUrl\"",
            "\"updatedAt\"",
        ]
        .iter()
        .map(|key| mine + text[mine..].find(key).unwrap())
        .collect();
        assert!(order.is_sorted(), "{text}");
        assert!(text.starts_with("[\n  {\n    \"serverName\""), "{text}");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(
            !format!("{credential:?}").contains("new"),
            "a token in Debug output"
        );
    }

    #[tokio::test]
    async fn a_usable_stored_token_is_used_and_none_is_auth_required_only_with_oauth() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TOKENS_FILE);
        let store = TokenStore::at(path.clone());
        let enabled = spec(Some(json!({"enabled": true, "clientId": "c"})));
        let error = access_token(&store, &client(), "srv", &enabled)
            .await
            .unwrap_err();
        assert_eq!(error.reason, Reason::AuthRequired);
        assert!(
            error.message.starts_with(
                "the server needs OAuth and no token is stored for it; authenticate with Qwen Code: \
                 open the /mcp dialog in an interactive `qwen` session and authenticate with 'srv'"
            ),
            "{error}"
        );
        assert_eq!(
            access_token(&store, &client(), "srv", &spec(None))
                .await
                .unwrap(),
            None,
            "a server without oauth connects without a token"
        );
        // Unreachable token URL: a usable token must not be refreshed.
        let later = now_ms() + HOUR_MS;
        write_store(
            &path,
            &[qwen_entry("srv", "stored", later, "http://127.0.0.1:1/t")],
        );
        for spec in [&enabled, &spec(None)] {
            let token = access_token(&store, &client(), "srv", spec).await.unwrap();
            assert_eq!(token.as_deref(), Some("stored"));
        }
    }
}

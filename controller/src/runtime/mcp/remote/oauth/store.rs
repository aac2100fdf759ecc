//! Where sign-ins are kept: the tokens of each resource and the client
//! registrations of each authorization server, in the same backends as the
//! user's secrets — the Secret Service when one is on the session bus, else
//! Steward's file store — each on the OAuth shelf of their own
//! ([`Shelf::OAuth`]: `service=steward-oauth` items, or
//! `HOME_DIR/steward/oauth.json`, 0600 in a 0700 directory).
//!
//! - **Keys.** A token is kept per issuer + resource (+ the entry's
//!   `oauth.account` label, so two accounts of one service can coexist):
//!   `token ISSUER RESOURCE [ACCOUNT]`. A dynamic client registration is kept
//!   per issuer and redirect URI (`client ISSUER REDIRECT`) and reused by
//!   every later sign-in, never registered again.
//! - **Shared by the user's workspaces.** Nothing in a key names a workspace
//!   or a server: every entry of any workspace whose URL lies under a
//!   resource (RFC 8707: same origin, path under the resource's) and whose
//!   account is the same uses its token.
//! - **One issuer per resource.** A sign-in with a new authorization server
//!   (a migration) removes that resource's tokens from the others.
//! - **The last challenge.** The `WWW-Authenticate` a server answered
//!   Steward's requests with (`challenge URL`), so that a sign-in starts
//!   from what the server asked (its scope, its metadata URL) even when
//!   the first request of a session needs none.
//! - **Serialized refreshes.** [`OAuthStore::lock`] takes an advisory lock
//!   on a file of its own per token key, across every Steward process of the
//!   user, so a rotating refresh token is used once.
//!
//! Values are JSON records; [`TokenRecord`] and [`ClientRecord`] never show
//! a credential in `Debug`.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::runtime::secrets::{self, BackendKind, SecretBackend, SecretError, SecretValue, Shelf};
use crate::support::paths::create_private_dir;

/// How a client authenticates at the token endpoint (RFC 7591 names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    /// A public client: `client_id` in the form, no secret.
    #[default]
    None,
    /// HTTP Basic with the client id and secret.
    ClientSecretBasic,
    /// `client_id` and `client_secret` in the form.
    ClientSecretPost,
}

impl AuthMethod {
    /// The RFC 7591 name.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::None => "none",
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
        }
    }

    /// The method of RFC 7591 name `name`, if we speak it.
    pub fn parse(name: &str) -> Option<AuthMethod> {
        match name {
            "none" => Some(AuthMethod::None),
            "client_secret_basic" => Some(AuthMethod::ClientSecretBasic),
            "client_secret_post" => Some(AuthMethod::ClientSecretPost),
            _ => None,
        }
    }
}

/// The tokens of one resource from one authorization server.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRecord {
    /// The authorization server's issuer identifier, as its metadata says.
    pub issuer: String,
    /// The resource, as its protected resource metadata publishes it.
    pub resource: String,
    /// The `oauth.account` label ("" for the user's default account).
    #[serde(default)]
    pub account: String,
    /// The client the tokens were issued to.
    pub client_id: String,
    /// Its secret, for a client Steward registered (a pre-registered
    /// client's secret stays in the entry's `${secret:…}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// How that client authenticates at the token endpoint.
    #[serde(default)]
    pub auth_method: AuthMethod,
    /// Where refreshes go.
    pub token_endpoint: String,
    /// The authorization server's authorization and registration
    /// endpoints at the sign-in (for `export`; none in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_endpoint: Option<String>,
    pub access_token: String,
    #[serde(default = "bearer")]
    pub token_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// The scopes granted.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Unix seconds; none: the server did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// Unix seconds of the sign-in or the last refresh.
    pub obtained_at: u64,
    /// Scopes a `403 insufficient_scope` asked for beyond the grant: the
    /// next sign-in asks for the union (step-up).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wanted_scopes: Vec<String>,
    /// Sign-ins for more scope since the last call that succeeded (bounds
    /// step-up, see `flow::MAX_STEP_UPS`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub step_ups: u32,
}

fn bearer() -> String {
    "Bearer".to_owned()
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl std::fmt::Debug for TokenRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenRecord")
            .field("issuer", &self.issuer)
            .field("resource", &self.resource)
            .field("account", &self.account)
            .field("client_id", &self.client_id)
            .field("auth_method", &self.auth_method)
            .field("refresh_token", &self.refresh_token.is_some())
            .field("scopes", &self.scopes)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

impl TokenRecord {
    /// The store key of this record.
    pub fn key(&self) -> String {
        token_key(&self.issuer, &self.resource, &self.account)
    }

    /// Seconds left before expiry at `now` (none: no expiry known).
    pub fn remaining(&self, now: u64) -> Option<i64> {
        self.expires_at.map(|at| at as i64 - now as i64)
    }

    /// Whether the access token should be refreshed before use at `now`:
    /// it expires within a minute, or within a tenth of its lifetime for
    /// short-lived ones.
    pub fn needs_refresh(&self, now: u64) -> bool {
        let Some(at) = self.expires_at else {
            return false;
        };
        let lifetime = at.saturating_sub(self.obtained_at);
        let margin = (lifetime / 10).clamp(1, 60);
        now + margin >= at
    }
}

/// A client Steward registered with an authorization server (RFC 7591).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientRecord {
    pub issuer: String,
    pub redirect_uri: String,
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    #[serde(default)]
    pub auth_method: AuthMethod,
    /// The grant types registered.
    #[serde(default)]
    pub grant_types: Vec<String>,
    /// The scopes the registration asked for (RFC 7591 `scope`; none: the
    /// server's default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    pub registered_at: u64,
}

impl std::fmt::Debug for ClientRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientRecord")
            .field("issuer", &self.issuer)
            .field("redirect_uri", &self.redirect_uri)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.is_some())
            .field("auth_method", &self.auth_method)
            .finish_non_exhaustive()
    }
}

/// The key of the tokens of `resource` from `issuer` for `account`.
pub fn token_key(issuer: &str, resource: &str, account: &str) -> String {
    if account.is_empty() {
        format!("token {issuer} {resource}")
    } else {
        format!("token {issuer} {resource} {account}")
    }
}

/// The key of the registration at `issuer` for `redirect_uri`.
pub fn client_key(issuer: &str, redirect_uri: &str) -> String {
    format!("client {issuer} {redirect_uri}")
}

/// The key of the last challenge of the server at `url`.
fn challenge_key(url: &str) -> String {
    format!("challenge {url}")
}

/// The (issuer, resource, account) of a token key.
fn parse_token_key(key: &str) -> Option<(&str, &str, &str)> {
    let mut parts = key.strip_prefix("token ")?.split(' ');
    let issuer = parts.next()?;
    let resource = parts.next()?;
    let account = parts.next().unwrap_or("");
    parts
        .next()
        .is_none()
        .then_some((issuer, resource, account))
}

/// Whether a request to `url` is one to `resource` (RFC 8707 / RFC 9728:
/// same scheme, host and port; the URL's path is the resource's or under
/// it). Queries and fragments do not matter.
pub fn serves(resource: &str, url: &str) -> bool {
    let (Ok(resource), Ok(url)) = (url::Url::parse(resource), url::Url::parse(url)) else {
        return false;
    };
    if resource.scheme() != url.scheme()
        || !resource
            .host_str()
            .zip(url.host_str())
            .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b))
        || resource.port_or_known_default() != url.port_or_known_default()
    {
        return false;
    }
    let (want, path) = (resource.path(), url.path());
    if want == "/" || want.is_empty() || want == path {
        return true;
    }
    path.starts_with(want)
        && (want.ends_with('/') || path.as_bytes().get(want.len()) == Some(&b'/'))
}

/// Unix seconds now.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A keyring, file or record that could not be used. Messages read after
/// "failed to".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Backend(#[from] SecretError),
    #[error("read the stored sign-in {key}: it is not a record Steward wrote ({reason})")]
    Corrupt { key: String, reason: String },
    #[error("lock the sign-in {key} against other Steward processes: {reason}")]
    Lock { key: String, reason: String },
}

/// The user's stored sign-ins (see the module docs).
pub struct OAuthStore {
    backend: Box<dyn SecretBackend>,
    home_dir: PathBuf,
}

impl std::fmt::Debug for OAuthStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthStore")
            .field("backend", &self.backend.kind())
            .field("home_dir", &self.home_dir)
            .finish()
    }
}

/// The lock of one token key, held while it lives.
#[derive(Debug)]
pub struct RefreshLock {
    _file: std::fs::File,
}

impl OAuthStore {
    /// The store of `home_dir`: the Secret Service when one is on the
    /// session bus, else `HOME_DIR/steward/oauth.json`.
    pub async fn open(home_dir: &Path) -> OAuthStore {
        OAuthStore {
            backend: secrets::open_shelf(home_dir, Shelf::OAuth).await,
            home_dir: home_dir.to_owned(),
        }
    }

    /// A store on `backend` (tests).
    pub fn with_backend(backend: Box<dyn SecretBackend>, home_dir: &Path) -> OAuthStore {
        OAuthStore {
            backend,
            home_dir: home_dir.to_owned(),
        }
    }

    /// Which backend answers.
    pub fn kind(&self) -> BackendKind {
        self.backend.kind()
    }

    /// Where the records are kept, for the user (`auth status`).
    pub fn where_kept(&self) -> String {
        match self.kind() {
            BackendKind::SecretService => "keyring".to_owned(),
            BackendKind::File => secrets::shelf_file_path(&self.home_dir, Shelf::OAuth)
                .display()
                .to_string(),
        }
    }

    async fn read<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        let Some(value) = self.backend.get(key).await? else {
            return Ok(None);
        };
        serde_json::from_str(value.expose())
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                key: key.to_owned(),
                reason: e.to_string(),
            })
    }

    async fn write<T: Serialize>(&self, key: &str, record: &T) -> Result<(), StoreError> {
        let text = serde_json::to_string(record).expect("a record always serializes");
        self.backend.set(key, &SecretValue::new(text)).await?;
        Ok(())
    }

    /// Every stored token (for `auth status`), unreadable ones skipped.
    pub async fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let mut out = Vec::new();
        for key in self.backend.names().await? {
            if parse_token_key(&key).is_some()
                && let Ok(Some(record)) = self.read::<TokenRecord>(&key).await
            {
                out.push(record);
            }
        }
        Ok(out)
    }

    /// The token to reach `url` with as `account`: of the records whose
    /// resource `url` lies under, the most recent.
    pub async fn token_for(
        &self,
        url: &str,
        account: &str,
    ) -> Result<Option<TokenRecord>, StoreError> {
        let mut best: Option<TokenRecord> = None;
        for key in self.backend.names().await? {
            let Some((_, resource, acct)) = parse_token_key(&key) else {
                continue;
            };
            if acct != account || !serves(resource, url) {
                continue;
            }
            let Some(record) = self.read::<TokenRecord>(&key).await? else {
                continue;
            };
            if best
                .as_ref()
                .is_none_or(|b| record.obtained_at >= b.obtained_at)
            {
                best = Some(record);
            }
        }
        Ok(best)
    }

    /// The token stored under `key`.
    pub async fn token(&self, key: &str) -> Result<Option<TokenRecord>, StoreError> {
        self.read(key).await
    }

    /// Stores `record` (a new sign-in or a refresh).
    pub async fn save_token(&self, record: &TokenRecord) -> Result<(), StoreError> {
        self.write(&record.key(), record).await
    }

    /// Stores the tokens of a new sign-in, and removes those of the same
    /// resource and account from other authorization servers (the resource
    /// moved: their tokens and clients are not for it any more).
    pub async fn save_sign_in(&self, record: &TokenRecord) -> Result<(), StoreError> {
        self.save_token(record).await?;
        for key in self.backend.names().await? {
            if let Some((issuer, resource, account)) = parse_token_key(&key)
                && resource == record.resource
                && account == record.account
                && issuer != record.issuer
            {
                self.backend.remove(&key).await?;
            }
        }
        Ok(())
    }

    /// Removes the tokens `url` would use as `account` (every issuer's):
    /// what was removed.
    pub async fn remove_tokens(
        &self,
        url: &str,
        account: &str,
    ) -> Result<Vec<TokenRecord>, StoreError> {
        let mut removed = Vec::new();
        for key in self.backend.names().await? {
            let Some((_, resource, acct)) = parse_token_key(&key) else {
                continue;
            };
            if acct == account && serves(resource, url) {
                if let Ok(Some(record)) = self.read::<TokenRecord>(&key).await {
                    removed.push(record);
                }
                self.backend.remove(&key).await?;
            }
        }
        Ok(removed)
    }

    /// The client registered at `issuer` for `redirect_uri`, if any.
    pub async fn client(
        &self,
        issuer: &str,
        redirect_uri: &str,
    ) -> Result<Option<ClientRecord>, StoreError> {
        self.read(&client_key(issuer, redirect_uri)).await
    }

    pub async fn save_client(&self, record: &ClientRecord) -> Result<(), StoreError> {
        self.write(&client_key(&record.issuer, &record.redirect_uri), record)
            .await
    }

    /// Forgets a registration the authorization server no longer knows.
    pub async fn remove_client(&self, issuer: &str, redirect_uri: &str) -> Result<(), StoreError> {
        self.backend
            .remove(&client_key(issuer, redirect_uri))
            .await?;
        Ok(())
    }

    /// The last `WWW-Authenticate` challenge the server at `url` answered with.
    pub async fn challenge(&self, url: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .backend
            .get(&challenge_key(url))
            .await?
            .map(|v| v.expose().to_owned()))
    }

    /// Keeps `challenge` as the last one of the server at `url`.
    pub async fn save_challenge(&self, url: &str, challenge: &str) -> Result<(), StoreError> {
        if self.challenge(url).await?.as_deref() == Some(challenge) {
            return Ok(());
        }
        self.backend
            .set(&challenge_key(url), &SecretValue::new(challenge.to_owned()))
            .await?;
        Ok(())
    }

    /// Takes the lock of token `key` across the user's Steward processes
    /// (blocking until the holder lets go, off the async threads).
    pub async fn lock(&self, key: &str) -> Result<RefreshLock, StoreError> {
        let dir = self.home_dir.join("steward").join("oauth-locks");
        let digest = Sha256::digest(key.as_bytes());
        let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        let path = dir.join(format!("{name}.lock"));
        let failed = |reason: String| StoreError::Lock {
            key: key.to_owned(),
            reason,
        };
        tokio::task::spawn_blocking(move || {
            create_private_dir(&dir).map_err(|e| e.to_string())?;
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .open(&path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            file.lock()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(RefreshLock { _file: file })
        })
        .await
        .map_err(|e| failed(e.to_string()))?
        .map_err(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::secrets::file::FileStore;

    fn store(dir: &Path) -> OAuthStore {
        OAuthStore::with_backend(
            Box::new(FileStore::new(secrets::shelf_file_path(dir, Shelf::OAuth))),
            dir,
        )
    }

    pub(crate) fn record(issuer: &str, resource: &str, account: &str, at: u64) -> TokenRecord {
        TokenRecord {
            issuer: issuer.to_owned(),
            resource: resource.to_owned(),
            account: account.to_owned(),
            client_id: "c".to_owned(),
            client_secret: None,
            auth_method: AuthMethod::None,
            token_endpoint: format!("{issuer}/token"),
            authorization_endpoint: None,
            registration_endpoint: None,
            access_token: format!("access-{at}"),
            token_type: "Bearer".to_owned(),
            refresh_token: Some("refresh".to_owned()),
            scopes: vec![],
            expires_at: Some(at + 3600),
            obtained_at: at,
            wanted_scopes: vec![],
            step_ups: 0,
        }
    }

    #[test]
    fn a_url_is_served_by_its_resource_and_those_above_it() {
        assert!(serves("https://h.example/mcp", "https://h.example/mcp"));
        assert!(serves(
            "https://h.example/mcp",
            "https://H.example:443/mcp/x?q"
        ));
        assert!(serves("https://h.example", "https://h.example/mcp"));
        assert!(serves("https://h.example/", "https://h.example/mcp"));
        assert!(!serves("https://h.example/mcp", "https://h.example/mcpx"));
        assert!(!serves("https://h.example/mcp", "http://h.example/mcp"));
        assert!(!serves(
            "https://h.example/mcp",
            "https://h.example:8443/mcp"
        ));
        assert!(!serves(
            "https://h.example/mcp",
            "https://other.example/mcp"
        ));
    }

    #[test]
    fn short_tokens_refresh_in_the_last_tenth_long_ones_in_the_last_minute() {
        let mut r = record("https://as", "https://r", "", 1000);
        r.expires_at = Some(1000 + 3600);
        assert!(!r.needs_refresh(1000 + 3539));
        assert!(r.needs_refresh(1000 + 3540));
        r.expires_at = Some(1000 + 30);
        assert!(!r.needs_refresh(1000 + 26));
        assert!(r.needs_refresh(1000 + 27));
        r.expires_at = None;
        assert!(!r.needs_refresh(u64::MAX / 2));
    }

    #[tokio::test]
    async fn tokens_are_found_by_url_and_account_and_a_new_issuer_replaces_the_old() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let work = record("https://as1", "https://h.example/mcp", "work", 10);
        let default = record("https://as1", "https://h.example/mcp", "", 20);
        store.save_sign_in(&work).await.unwrap();
        store.save_sign_in(&default).await.unwrap();
        let found = store.token_for("https://h.example/mcp", "").await.unwrap();
        assert_eq!(found.unwrap().access_token, "access-20");
        let found = store
            .token_for("https://h.example/mcp", "work")
            .await
            .unwrap();
        assert_eq!(found.unwrap().access_token, "access-10");
        assert!(
            store
                .token_for("https://other.example/mcp", "")
                .await
                .unwrap()
                .is_none()
        );
        // The resource moved to another authorization server.
        store
            .save_sign_in(&record("https://as2", "https://h.example/mcp", "", 30))
            .await
            .unwrap();
        let tokens = store.tokens().await.unwrap();
        let issuers: Vec<(&str, &str)> = tokens
            .iter()
            .map(|t| (t.issuer.as_str(), t.account.as_str()))
            .collect();
        assert_eq!(issuers.len(), 2, "{issuers:?}");
        assert!(issuers.contains(&("https://as2", "")));
        assert!(issuers.contains(&("https://as1", "work")));
        let removed = store
            .remove_tokens("https://h.example/mcp", "")
            .await
            .unwrap();
        assert_eq!(removed.len(), 1);
        assert_eq!(store.tokens().await.unwrap().len(), 1);
        // Never a credential in Debug output.
        let shown = format!("{work:?}");
        assert!(!shown.contains("access-10") && !shown.contains("\"refresh\""));
    }

    #[tokio::test]
    async fn registrations_are_kept_per_issuer_and_redirect_uri() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let client = ClientRecord {
            issuer: "https://as".into(),
            redirect_uri: "http://127.0.0.1:4000/callback".into(),
            client_id: "id".into(),
            client_secret: Some("shh".into()),
            auth_method: AuthMethod::ClientSecretBasic,
            grant_types: vec!["authorization_code".into()],
            scopes: vec![],
            registered_at: 1,
        };
        store.save_client(&client).await.unwrap();
        let got = store
            .client("https://as", "http://127.0.0.1:4000/callback")
            .await
            .unwrap();
        assert_eq!(got, Some(client.clone()));
        assert!(
            store
                .client("https://as", "http://127.0.0.1:4001/callback")
                .await
                .unwrap()
                .is_none()
        );
        assert!(!format!("{client:?}").contains("shh"));
        let lock = store.lock("token a b").await.unwrap();
        drop(lock);
    }
}

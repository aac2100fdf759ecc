//! The token a remote connection sends, kept fresh: [`TokenSource`] gives
//! every request the current bearer, refreshes it shortly before it
//! expires, and once when the server answers 401; it reads the store again
//! first, so a token another process refreshed or signed in is used as is.
//!
//! - **Rotation, serialized.** A refresh takes the token's lock across the
//!   user's Steward processes ([`OAuthStore::lock`]), reads the record again
//!   under it, and refreshes only if the token it holds is still the one
//!   that expired or was refused; the new refresh token replaces the old.
//! - **Once, not a loop.** A refresh the authorization server rejects
//!   (`invalid_grant`: revoked, expired) is remembered for the life of the
//!   process and never tried again; nor is an access token a server
//!   refused. The server goes `AuthRequired` with the command to run, and
//!   nothing is deleted: credentials that may still work elsewhere stay.
//!   A transient failure (the token endpoint unreachable, a 5xx) is a
//!   plain start failure, which backs off.
//! - **Step-up.** The scopes a `403 insufficient_scope` challenge asks for
//!   are written to the record (`wantedScopes`), so the next `steward auth
//!   login` asks for the union of those and the grant; a token signed in
//!   since is picked up on the next 403. After
//!   [`MAX_STEP_UPS`](super::flow::MAX_STEP_UPS) such sign-ins in a row
//!   that did not help, Steward stops asking.
//! - **The challenge** of every refusal is kept ([`OAuthStore::save_challenge`]):
//!   the next sign-in starts from what the server asked.
//! - **Qwen Code's tokens** are used while valid, never refreshed.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{LazyLock, Mutex};

use rmcp::transport::auth::WWWAuthenticateParams;
use sha2::{Digest as _, Sha256};
use steward_schema::resource::{McpServerSpec, Reason};

use super::flow::MAX_STEP_UPS;
use super::http::{ClientAuth, clients, scope_list, token_request};
use super::store::{AuthMethod, OAuthStore, TokenRecord, now_secs};
use super::{Notice, OAuthEntry, auth_required_message, notify, qwen};
use crate::observe::metrics::metrics;
use crate::runtime::start::StartError;
use crate::support::sync::lock;

/// Fingerprints of refresh tokens an authorization server rejected, and of
/// access tokens a server refused, in this process: never sent again.
static REFUSED: LazyLock<Mutex<HashSet<[u8; 32]>>> = LazyLock::new(Default::default);
/// Fingerprints of access tokens a server refused for lack of scope: still
/// sent, but no reason to retry a server that waits for a sign-in.
static NARROW: LazyLock<Mutex<HashSet<[u8; 32]>>> = LazyLock::new(Default::default);

fn fingerprint(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn refused(token: &str) -> bool {
    lock(&REFUSED).contains(&fingerprint(token))
}

fn refuse(token: &str) {
    lock(&REFUSED).insert(fingerprint(token));
}

/// Whether the stores (read, no request sent) hold a credential that could
/// let server `name` at `url` as `account` in, that this process has not
/// seen refused: a Steward token that is valid or can be refreshed, or a
/// valid Qwen Code token. What a server waiting for a sign-in is retried on.
pub async fn might_let_in(home: &std::path::Path, name: &str, url: &str, account: &str) -> bool {
    let store = OAuthStore::open(home).await;
    if let Ok(Some(record)) = store.token_for(url, account).await {
        let token = &record.access_token;
        let usable = !refused(token)
            && !lock(&NARROW).contains(&fingerprint(token))
            && !record.needs_refresh(now_secs());
        let refreshable = record
            .refresh_token
            .as_deref()
            .is_some_and(|refresh| !refused(refresh))
            && !lock(&NARROW).contains(&fingerprint(token));
        if usable || refreshable {
            return true;
        }
    }
    match qwen::credential(home, name) {
        Ok(Some(credential)) => {
            let token = credential.token;
            !token.expired(now_secs().saturating_mul(1000)) && !refused(&token.access_token)
        }
        _ => false,
    }
}

/// What a connection holds.
#[derive(Clone)]
enum Held {
    None,
    Qwen(String),
    Steward(Box<TokenRecord>),
}

impl Held {
    fn access(&self) -> Option<&str> {
        match self {
            Held::None => None,
            Held::Qwen(token) => Some(token),
            Held::Steward(record) => Some(&record.access_token),
        }
    }
}

/// The bearer token of one remote server's connection (see the module docs).
pub struct TokenSource {
    server: String,
    url: String,
    oauth: OAuthEntry,
    home_dir: Option<PathBuf>,
    held: tokio::sync::Mutex<Held>,
    /// Why the last refresh or sign-in check failed (for `AuthRequired`).
    problem: Mutex<Option<Problem>>,
}

/// Why a server needs the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub what: String,
    /// Whether a sign-in can help (not once step-ups hit their limit).
    pub sign_in_helps: bool,
    /// A refresh failed for now (the authorization server unreachable, a
    /// 5xx): tried again, the user need not sign in.
    pub transient: bool,
}

impl Problem {
    fn sign_in(what: impl Into<String>) -> Problem {
        Problem {
            what: what.into(),
            sign_in_helps: true,
            transient: false,
        }
    }

    fn for_now(what: impl Into<String>) -> Problem {
        Problem {
            transient: true,
            ..Problem::sign_in(what)
        }
    }
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// How a refresh ended.
enum Refreshed {
    Fresh(Box<TokenRecord>),
    /// Only the user can help (the message says why).
    NeedsUser(String),
    /// Try again later.
    Failed(String),
}

impl Refreshed {
    /// What a refresh that did not give a token leaves the server needing.
    fn problem(&self) -> Option<Problem> {
        match self {
            Refreshed::Fresh(_) => None,
            Refreshed::NeedsUser(why) => Some(Problem::sign_in(why.clone())),
            Refreshed::Failed(why) => Some(Problem::for_now(why.clone())),
        }
    }
}

impl TokenSource {
    /// The source of server `name` (a resolved remote spec), with the token
    /// to connect with: Steward's stored one (refreshed if it is about to
    /// expire), else Qwen Code's while valid, else none. `AuthRequired`
    /// when the entry needs OAuth (`oauth.enabled`) and has no usable token,
    /// or its token cannot be refreshed.
    pub async fn open(
        name: &str,
        url: &str,
        spec: &McpServerSpec,
    ) -> Result<TokenSource, StartError> {
        let source = TokenSource {
            server: name.to_owned(),
            url: url.to_owned(),
            oauth: OAuthEntry::of(spec),
            home_dir: super::home_dir(),
            held: tokio::sync::Mutex::new(Held::None),
            problem: Mutex::new(None),
        };
        let held = source.initial().await?;
        *source.held.lock().await = held;
        Ok(source)
    }

    fn auth_required(&self, what: &str) -> StartError {
        StartError::new(
            Reason::AuthRequired,
            auth_required_message(&self.server, what),
        )
    }

    async fn store(&self) -> Option<OAuthStore> {
        match &self.home_dir {
            Some(home) => Some(OAuthStore::open(home).await),
            None => None,
        }
    }

    async fn initial(&self) -> Result<Held, StartError> {
        let stored = match self.store().await {
            Some(store) => store
                .token_for(&self.url, &self.oauth.account)
                .await
                .map_err(|e| StartError::failed(format!("read the stored sign-in: {e}")))?,
            None => None,
        };
        if let Some(record) = stored {
            let usable = !refused(&record.access_token) && !record.needs_refresh(now_secs());
            if usable {
                return Ok(Held::Steward(Box::new(record)));
            }
            return match self.refresh(&record).await {
                Refreshed::Fresh(record) => Ok(Held::Steward(record)),
                Refreshed::NeedsUser(why) => Err(self.auth_required(&why)),
                Refreshed::Failed(why) => Err(StartError::failed(why)),
            };
        }
        if let Some(token) = self.qwen_token() {
            tracing::debug!(server = %self.server, "using the token Qwen Code stored");
            return Ok(Held::Qwen(token));
        }
        if self.oauth.enabled {
            return Err(self.auth_required("the server needs OAuth and no one has signed in to it"));
        }
        Ok(Held::None)
    }

    /// Qwen Code's valid token for this server, if any.
    fn qwen_token(&self) -> Option<String> {
        let home = self.home_dir.as_ref()?;
        match qwen::credential(home, &self.server) {
            Ok(Some(credential)) => {
                let now_ms = now_secs().saturating_mul(1000);
                let token = credential.token;
                (!token.expired(now_ms) && !refused(&token.access_token))
                    .then_some(token.access_token)
            }
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(server = %self.server, error = %crate::runtime::mcp::describe::describe(&error, crate::runtime::mcp::describe::dig_nothing), "ignoring Qwen Code's token store");
                None
            }
        }
    }

    /// Why the server needs the user, as far as this source knows.
    pub fn problem(&self) -> Option<Problem> {
        lock(&self.problem).clone()
    }

    /// Why the last refresh failed, when it failed only for now.
    pub fn transient(&self) -> Option<String> {
        lock(&self.problem)
            .as_ref()
            .filter(|p| p.transient)
            .map(|p| p.what.clone())
    }

    /// Whether the connection holds a token at all.
    pub async fn has_token(&self) -> bool {
        self.held.lock().await.access().is_some()
    }

    /// The bearer for the next request, refreshed first when it is about
    /// to expire (a failed refresh keeps the old one: the server decides).
    pub async fn bearer(&self) -> Option<String> {
        let held = self.held.lock().await.clone();
        if let Held::Steward(record) = &held
            && record.needs_refresh(now_secs())
            && let Refreshed::Fresh(record) = self.refresh(record).await
        {
            let token = record.access_token.clone();
            *self.held.lock().await = Held::Steward(record);
            return Some(token);
        }
        held.access().map(str::to_owned)
    }

    /// The server answered 401 to `sent` (with `challenge`): a token to
    /// retry with, if there is one — signed in or refreshed by another
    /// process, or refreshed now (once). `None`: the request fails, and the
    /// server needs a sign-in.
    pub async fn unauthorized(
        &self,
        sent: Option<&str>,
        challenge: Option<&str>,
    ) -> Option<String> {
        if let Some(sent) = sent {
            refuse(sent);
        }
        let store = self.store().await;
        if let (Some(store), Some(challenge)) = (&store, challenge)
            && let Err(e) = store.save_challenge(&self.url, challenge).await
        {
            tracing::debug!(server = %self.server, error = %e, "could not keep the challenge");
        }
        let stored = match &store {
            Some(store) => store
                .token_for(&self.url, &self.oauth.account)
                .await
                .ok()
                .flatten(),
            None => None,
        };
        let Some(record) = stored else {
            *lock(&self.problem) = Some(Problem::sign_in(match sent {
                Some(_) => "the server refused the token (HTTP 401)",
                None => "the server asks for a sign-in (HTTP 401)",
            }));
            return None;
        };
        if Some(record.access_token.as_str()) != sent && !refused(&record.access_token) {
            let token = record.access_token.clone();
            *self.held.lock().await = Held::Steward(Box::new(record));
            return Some(token);
        }
        match self.refresh(&record).await {
            Refreshed::Fresh(record) => {
                let token = record.access_token.clone();
                *self.held.lock().await = Held::Steward(record);
                Some(token)
            }
            failed => {
                *lock(&self.problem) = failed.problem();
                None
            }
        }
    }

    /// The server answered `403` with `challenge` to `sent`: a token signed
    /// in since (with more scope) to retry with; else the scopes it asks for
    /// beyond the grant are written down for the next sign-in, and `None`.
    pub async fn forbidden(&self, sent: Option<&str>, challenge: &str) -> Option<String> {
        let store = self.store().await?;
        if let Err(e) = store.save_challenge(&self.url, challenge).await {
            tracing::debug!(server = %self.server, error = %e, "could not keep the challenge");
        }
        let record = store
            .token_for(&self.url, &self.oauth.account)
            .await
            .ok()
            .flatten()?;
        if Some(record.access_token.as_str()) != sent && !refused(&record.access_token) {
            let token = record.access_token.clone();
            *self.held.lock().await = Held::Steward(Box::new(record));
            return Some(token);
        }
        if let Some(sent) = sent {
            lock(&NARROW).insert(fingerprint(sent));
        }
        let base = url::Url::parse(&self.url).ok()?;
        let asked = WWWAuthenticateParams::parse(challenge, &base)
            .scope
            .map(|s| scope_list(&s))
            .unwrap_or_default();
        let named = if asked.is_empty() {
            "none named".to_owned()
        } else {
            asked.join(" ")
        };
        let why = if record.step_ups >= MAX_STEP_UPS {
            // Not "sign in": another sign-in was refused by the limit.
            *lock(&self.problem) = Some(Problem {
                what: format!(
                    "the server still refuses the token for lack of scope ({named}) after {} sign-ins for more; Steward stopped asking: check what the account may do at the authorization server, then start over with `steward auth logout {}`",
                    record.step_ups, self.server
                ),
                sign_in_helps: false,
                transient: false,
            });
            return None;
        } else if asked.iter().all(|s| record.scopes.contains(s)) {
            format!(
                "the server refuses the token for lack of scope although it holds the scopes it names ({named})"
            )
        } else {
            format!("the server asks for more scope ({named})")
        };
        *lock(&self.problem) = Some(Problem::sign_in(why));
        if !asked.is_empty() && record.wanted_scopes != asked {
            let _lock = store.lock(&record.key()).await.ok()?;
            if let Ok(Some(mut fresh)) = store.token(&record.key()).await
                && fresh.access_token == record.access_token
            {
                fresh.wanted_scopes = asked;
                let _ = store.save_token(&fresh).await;
            }
        }
        None
    }

    /// A request with the held token succeeded: a run of step-ups is over.
    pub async fn succeeded(&self) {
        let record = match &*self.held.lock().await {
            Held::Steward(record) if record.step_ups > 0 => record.clone(),
            _ => return,
        };
        let Some(store) = self.store().await else {
            return;
        };
        let Ok(_lock) = store.lock(&record.key()).await else {
            return;
        };
        if let Ok(Some(mut fresh)) = store.token(&record.key()).await
            && fresh.access_token == record.access_token
        {
            fresh.step_ups = 0;
            if store.save_token(&fresh).await.is_ok() {
                *self.held.lock().await = Held::Steward(Box::new(fresh));
            }
        }
    }

    /// Refreshes `record` under its lock (see the module docs); counts the
    /// outcome and tells the controller of a failure.
    async fn refresh(&self, record: &TokenRecord) -> Refreshed {
        let outcome = match self.refresh_locked(record).await {
            // Settled without a request (another process refreshed, or
            // nothing to refresh with): not counted, not news.
            Ok(outcome) => return outcome,
            Err(outcome) => outcome,
        };
        let result = match &outcome {
            Refreshed::Fresh(_) => "success",
            Refreshed::NeedsUser(_) => "rejected",
            Refreshed::Failed(_) => "error",
        };
        metrics().oauth_refreshed(&self.server, result);
        match &outcome {
            Refreshed::Fresh(_) => {
                tracing::info!(server = %self.server, "refreshed the oauth access token");
            }
            Refreshed::NeedsUser(why) | Refreshed::Failed(why) => {
                tracing::warn!(server = %self.server, error = %why, "could not refresh the oauth access token");
                *lock(&self.problem) = outcome.problem();
                notify(Notice::RefreshFailed {
                    server: self.server.clone(),
                    message: why.clone(),
                    needs_user: matches!(outcome, Refreshed::NeedsUser(_)),
                });
            }
        }
        outcome
    }

    /// `Ok`: settled without asking the authorization server (another
    /// process refreshed, or there is nothing to ask with); `Err`: the
    /// outcome of asking it (or of failing to).
    async fn refresh_locked(&self, record: &TokenRecord) -> Result<Refreshed, Refreshed> {
        let Some(store) = self.store().await else {
            return Err(Refreshed::NeedsUser("no token store".to_owned()));
        };
        let key = record.key();
        let _lock = match store.lock(&key).await {
            Ok(lock) => lock,
            Err(e) => return Err(Refreshed::Failed(e.to_string())),
        };
        // Another process may have refreshed (or signed in) meanwhile.
        let current = match store.token(&key).await {
            Ok(Some(current)) => current,
            Ok(None) => {
                return Ok(Refreshed::NeedsUser(
                    "the stored sign-in was removed".to_owned(),
                ));
            }
            Err(e) => return Err(Refreshed::Failed(e.to_string())),
        };
        if current.access_token != record.access_token
            && !refused(&current.access_token)
            && !current.needs_refresh(now_secs())
        {
            return Ok(Refreshed::Fresh(Box::new(current)));
        }
        // Nothing to ask the authorization server: not a refresh.
        let Some(refresh_token) = current.refresh_token.clone() else {
            return Ok(Refreshed::NeedsUser(
                "the token expired or was refused, and there is no refresh token".to_owned(),
            ));
        };
        if refused(&refresh_token) {
            return Ok(Refreshed::NeedsUser(
                "the authorization server rejected the refresh token".to_owned(),
            ));
        }
        let http = match clients().await {
            Ok(http) => http,
            Err(e) => return Err(Refreshed::Failed(e.to_string())),
        };
        // A pre-registered client's secret is the entry's, as it is now.
        let secret = match (&current.client_secret, &self.oauth.client_id) {
            (Some(secret), _) => Some(secret.clone()),
            (None, Some(id)) if *id == current.client_id => self.oauth.client_secret.clone(),
            _ => None,
        };
        let method = match (current.auth_method, &secret) {
            (AuthMethod::None, _) | (_, None) => AuthMethod::None,
            (method, Some(_)) => method,
        };
        let auth = ClientAuth {
            client_id: &current.client_id,
            client_secret: secret.as_deref(),
            method,
        };
        let form = [
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token.as_str()),
            ("resource", current.resource.as_str()),
        ];
        match token_request(&http, &current.token_endpoint, &form, auth).await {
            Ok(answer) => {
                let now = now_secs();
                let mut fresh = current.clone();
                fresh.access_token = answer.access_token;
                fresh.token_type = answer.token_type;
                if let Some(rotated) = answer.refresh_token {
                    fresh.refresh_token = Some(rotated);
                }
                if let Some(scope) = answer.scope {
                    fresh.scopes = scope_list(&scope);
                }
                fresh.expires_at = answer.expires_in.map(|s| now.saturating_add(s));
                fresh.obtained_at = now;
                if let Err(e) = store.save_token(&fresh).await {
                    // The new token works now; a rotated refresh token may be
                    // lost, which the next refresh will say.
                    tracing::warn!(server = %self.server, error = %e, "could not store the refreshed token");
                }
                Err(Refreshed::Fresh(Box::new(fresh)))
            }
            Err(error) if error.needs_user() => {
                refuse(&refresh_token);
                Err(Refreshed::NeedsUser(format!("refresh the token: {error}")))
            }
            Err(error) => Err(Refreshed::Failed(format!(
                "refresh the token: {}",
                crate::runtime::mcp::describe::describe(
                    &error,
                    crate::runtime::mcp::describe::dig_nothing
                )
            ))),
        }
    }
}

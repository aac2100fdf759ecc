//! A call that needs a sign-in: the server refused its credentials before
//! running it (HTTP 401 after a refresh, or 403 `insufficient_scope`), or
//! the server waits for one (`AuthRequired`). The agent is told what the
//! user runs — or, when it declared URL-mode elicitation (2025-11-25),
//! asked to open the authorization page: Steward runs the flow on its own
//! loopback callback, keeps the token, tells the controllers of this user
//! (as `steward auth login` does), and the call goes on. It had not run,
//! so going on is its first run, never a second.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::model::{CustomNotification, ElicitationAction, ServerNotification};
use rmcp::service::ElicitationMode;
use rmcp::{Peer, RoleServer};
use steward_schema::resource::McpTransport;
use tokio_util::sync::CancellationToken;

use super::Gateway;
use crate::control::{Request, client};
use crate::desired::snapshot::{Desired, Key};
use crate::runtime::mcp::remote::SignInNeed;
use crate::runtime::mcp::remote::oauth::store::OAuthStore;
use crate::runtime::mcp::remote::oauth::{OAuthEntry, callback, flow, http};
use crate::runtime::mcp::remote::url_of;
use crate::runtime::secrets::book::SecretBook;
use crate::runtime::secrets::{Unresolved, missing_message, resolve_mcp};
use crate::support::sync::lock;

/// How long the user has to finish signing in once the agent accepted.
const SIGN_IN_TIME: Duration = Duration::from_secs(300);

/// The tool error's text for a call to `server` refused for `need`.
pub fn needed(server: &str, need: &SignInNeed) -> String {
    let what = match need {
        SignInNeed::SignIn => "sign in",
        SignInNeed::MoreScope(_) => "sign in again (for more scope)",
    };
    format!(
        "server \"{server}\" did not run this call: {need}; {what} with `steward auth login {server}`, then call again"
    )
}

/// Sign-ins through agents: one at a time (they share loopback ports), and
/// a call that waited for another's sign-in of its server goes on with it.
#[derive(Default)]
pub struct AgentSignIns {
    /// Resolves the entries' `${secret:…}` references (set by the engine).
    secrets: OnceLock<Arc<SecretBook>>,
    one_at_a_time: tokio::sync::Mutex<()>,
    /// Sign-ins finished, by server.
    done: Mutex<HashMap<String, u64>>,
}

impl AgentSignIns {
    pub fn use_secrets(&self, book: Arc<SecretBook>) {
        let _ = self.secrets.set(book);
    }

    fn done(&self, server: &str) -> u64 {
        lock(&self.done).get(server).copied().unwrap_or(0)
    }
}

/// Whether the agent of `peer` declared URL-mode elicitation: it can be
/// asked to open a page.
pub fn opens_pages(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Url)
}

impl Gateway {
    /// Signs the user in to `server` through the agent of `peer` (whose
    /// call `ct` cancels): `Ok` once a token is kept (by this sign-in or
    /// one the call waited for), else what to tell the agent.
    pub(super) async fn sign_in_through_agent(
        &self,
        server: &str,
        peer: &Peer<RoleServer>,
        ct: &CancellationToken,
    ) -> Result<(), String> {
        let before = self.sign_ins.done(server);
        let _one = tokio::select! {
            one = self.sign_ins.one_at_a_time.lock() => one,
            () = ct.cancelled() => return Err("the call was cancelled".to_owned()),
        };
        if self.sign_ins.done(server) != before {
            return Ok(());
        }
        let target = self.sign_in_target(server)?;
        let home = self.store.paths().home_dir.clone();
        let store = OAuthStore::open(&home).await;
        let http = http::clients().await.map_err(|e| e.to_string())?;
        let prepared = flow::prepare(&store, http, target)
            .await
            .map_err(|e| e.to_string())?;
        let mut listener = callback::listen(prepared.redirect.clone())
            .await
            .map_err(|e| e.to_string())?;
        let url = url::Url::parse(&prepared.authorization_url)
            .map_err(|e| format!("read the authorization URL: {e}"))?;
        let elicitation_id = format!("steward-sign-in-{}", next_elicitation_id());
        let message = format!(
            "Server \"{server}\" needs you to sign in at {} to run this call. Open the page, approve, and the call goes on.",
            prepared.issuer
        );
        let asked =
            peer.elicit_url_with_timeout(message, url, elicitation_id.clone(), Some(SIGN_IN_TIME));
        let action = tokio::select! {
            action = asked => action.map_err(|e| format!("ask the agent to open the sign-in page: {e}"))?,
            () = ct.cancelled() => return Err("the call was cancelled".to_owned()),
        };
        match action {
            ElicitationAction::Accept => {}
            ElicitationAction::Decline => {
                return Err("the user declined to sign in".to_owned());
            }
            _ => return Err("the user cancelled the sign-in".to_owned()),
        }
        let deadline = tokio::time::Instant::now() + SIGN_IN_TIME;
        let record = tokio::select! {
            r = flow::complete_on(&prepared, &store, &mut listener, deadline) => r.map_err(|e| e.to_string())?,
            () = ct.cancelled() => return Err("the call was cancelled".to_owned()),
        };
        tracing::info!(server, issuer = %record.issuer, "signed in through the agent");
        let complete = ServerNotification::CustomNotification(CustomNotification::new(
            "notifications/elicitation/complete",
            Some(serde_json::json!({ "elicitationId": elicitation_id })),
        ));
        let _ = peer.send_notification(complete).await;
        *lock(&self.sign_ins.done)
            .entry(server.to_owned())
            .or_default() += 1;
        // Every controller of this user, this one too: the servers that
        // waited for this sign-in connect at once, as after `auth login`.
        let asked = Request::AuthChanged {
            resource: record.resource.clone(),
            account: record.account.clone(),
            signed_out: false,
        };
        client::tell_every_controller(self.store.paths(), &asked).await;
        Ok(())
    }

    /// What the flow needs for `server`: its URL and `oauth` settings, its
    /// secrets resolved.
    fn sign_in_target(&self, server: &str) -> Result<flow::Target, String> {
        let snap = self.store.snapshot();
        let Some(Desired::Mcp(d)) = snap.get(&Key::mcp(server)) else {
            return Err(format!("server \"{server}\" is not configured"));
        };
        let spec = match self.sign_ins.secrets.get() {
            Some(book) => match resolve_mcp(book, &d.spec, &self.store.paths().workspace) {
                Ok(resolved) => resolved.spec,
                Err(Unresolved::Missing(names)) => return Err(missing_message(&names)),
                Err(Unresolved::Unavailable(why)) => return Err(why),
                Err(Unresolved::Pending) => {
                    return Err("its secrets are still being read; call again".to_owned());
                }
            },
            None => d.spec.clone(),
        };
        let url = url_of(&spec).map_err(|e| e.to_string())?.to_owned();
        Ok(flow::Target {
            server: server.to_owned(),
            url,
            sse: spec.transport == McpTransport::Sse,
            oauth: OAuthEntry::of(&spec),
            client_metadata_url: snap.desired.policy.oauth_client_metadata_url.clone(),
            challenge: None,
        })
    }
}

/// An id no other elicitation of this process has.
fn next_elicitation_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

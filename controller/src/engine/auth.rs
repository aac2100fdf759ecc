//! Sign-ins, as the event loop sees them: `steward auth login|logout` says
//! a resource's sign-in changed (the servers it serves that wait for one
//! connect again at once, and only those; a sign-out restarts those that
//! run, so they stop using it), and the runtime's notices of failed
//! refreshes become events.
//!
//! A server waiting for a sign-in is never retried blindly: every
//! `--auth-recheck-ms` the stores are read (no request sent) for a
//! credential that might let it in — Steward's token for its URL and
//! account, Qwen Code's for its name — that this controller has not seen
//! refused (Qwen Code signed in, say); only then is it retried.

use std::sync::Arc;

use tokio::sync::mpsc;

use steward_schema::resource::{McpServerSpec, Phase};

use super::Shared;
use crate::control::{Answer, Reply};
use crate::desired::snapshot::{Desired, Key};
use crate::engine::reconcile::Restart;
use crate::observe::clock::now_rfc3339;
use crate::observe::events::{EventType, NewEvent, ObjectRef};
use crate::runtime::mcp::remote::oauth::source::might_let_in;
use crate::runtime::mcp::remote::oauth::store::serves;
use crate::runtime::mcp::remote::oauth::{Notice, OAuthEntry};
use crate::runtime::mcp::remote::url_of;

/// The URL and account of remote MCP server `key` (its secrets resolved
/// when they can be).
fn remote_of(shared: &Shared, key: &Key) -> Option<(String, String)> {
    let snap = shared.store.snapshot();
    let Some(Desired::Mcp(d)) = snap.get(key) else {
        return None;
    };
    let workspace = &shared.store.paths().workspace;
    let resolved: Arc<McpServerSpec> =
        match crate::runtime::secrets::resolve_mcp(&shared.secrets, &d.spec, workspace) {
            Ok(r) => r.spec,
            Err(_) => d.spec.clone(),
        };
    let url = url_of(&resolved).ok()?.to_owned();
    Some((url, OAuthEntry::of(&resolved).account))
}

/// The remote MCP servers whose URL lies under `resource` and whose
/// account is `account`.
fn servers_of(shared: &Shared, resource: &str, account: &str) -> Vec<Key> {
    shared
        .store
        .snapshot()
        .keys()
        .into_iter()
        .filter(|key| {
            remote_of(shared, key)
                .is_some_and(|(url, acct)| serves(resource, &url) && acct == account)
        })
        .collect()
}

/// Reads the stores for each server waiting for a sign-in, in a task;
/// those a credential might now let in come back on `tx`.
pub(super) fn look(shared: &Shared, tx: mpsc::UnboundedSender<Vec<Key>>) {
    let targets: Vec<(Key, String, String)> = shared
        .reconciler
        .waiting_for_sign_in()
        .into_iter()
        .filter_map(|key| remote_of(shared, &key).map(|(url, account)| (key, url, account)))
        .collect();
    if targets.is_empty() {
        return;
    }
    let home = shared.store.paths().home_dir.clone();
    tokio::spawn(async move {
        let mut found = Vec::new();
        let waiting = targets.len();
        for (key, url, account) in targets {
            if might_let_in(&home, &key.name, &url, &account).await {
                found.push(key);
            }
        }
        tracing::debug!(
            waiting,
            found = found.len(),
            "looked in the token stores for servers waiting for a sign-in"
        );
        if !found.is_empty() {
            let _ = tx.send(found);
        }
    });
}

/// Retries the waiting servers a credential might now let in.
pub(super) fn looked(shared: &Shared, found: Vec<Key>) {
    let still = shared.reconciler.waiting_for_sign_in();
    for key in found.into_iter().filter(|k| still.contains(k)) {
        tracing::info!(server = %key, "a credential for the server is in the store: connecting");
        shared.reconciler.retry_now(&key);
        shared.queue.add(key);
    }
}

/// `steward auth login|logout` changed the sign-in of `resource`.
pub(super) fn changed(shared: &Shared, resource: &str, account: &str, signed_out: bool) -> Answer {
    let keys = servers_of(shared, resource, account);
    let now = now_rfc3339();
    let mut acted = Vec::new();
    for key in &keys {
        let status = shared.status.get(key);
        let ready = status.as_ref().is_some_and(|s| s.phase == Phase::Ready);
        let (reason, message) = if signed_out {
            ("SignedOut", "signed out (steward auth logout)")
        } else {
            ("SignedIn", "signed in (steward auth login)")
        };
        shared.status.events().record(
            ObjectRef::server(key),
            NewEvent::new(EventType::Normal, reason, message),
            &now,
        );
        if signed_out && ready {
            // It holds the token: a new connection goes without it.
            shared.reconciler.request_restart(key, Restart::Graceful);
        } else if ready {
            // Running: it takes the new token on the server's next refusal.
            continue;
        } else {
            shared.reconciler.retry_now(key);
        }
        shared.queue.add(key.clone());
        acted.push(key.name.clone());
    }
    let names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
    Ok(Reply::Message(match (names.is_empty(), acted.is_empty()) {
        (true, _) => "no server of this workspace uses it".to_owned(),
        (false, true) => format!(
            "{} running; the new token is used from the server's next refusal",
            names.join(", ")
        ),
        (false, false) if signed_out => format!("restarting {}", acted.join(", ")),
        (false, false) => format!("connecting {}", acted.join(", ")),
    }))
}

/// A notice of the runtime: an event on the server it is about.
pub(super) fn noticed(shared: &Shared, notice: Notice) {
    match notice {
        Notice::RefreshFailed {
            server,
            message,
            needs_user,
        } => {
            let key = Key::mcp(&server);
            if !shared.store.snapshot().contains(&key) {
                return;
            }
            let message = if needs_user {
                format!("{message}; sign in with `steward auth login {server}`")
            } else {
                message
            };
            shared.status.events().record(
                ObjectRef::server(&key),
                NewEvent::new(EventType::Warning, "TokenRefreshFailed", message),
                &now_rfc3339(),
            );
        }
    }
}

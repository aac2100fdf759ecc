//! Sign-ins, as the event loop sees them: `steward auth login|logout` says
//! a resource's sign-in changed (the servers it serves that wait for one
//! connect again at once, and only those; a sign-out restarts those that
//! run, so they stop using it), and the runtime's notices of failed
//! refreshes become events.

use std::sync::Arc;

use steward_schema::resource::{McpServerSpec, Phase};

use super::Shared;
use crate::control::{Answer, Reply};
use crate::desired::snapshot::{Desired, Key};
use crate::engine::reconcile::Restart;
use crate::observe::clock::now_rfc3339;
use crate::observe::events::{EventType, NewEvent, ObjectRef};
use crate::runtime::mcp::remote::oauth::store::serves;
use crate::runtime::mcp::remote::oauth::{Notice, OAuthEntry};
use crate::runtime::mcp::remote::url_of;

/// The remote MCP servers whose URL lies under `resource` and whose
/// account is `account`, with their (resolved, when it can be) spec.
fn servers_of(shared: &Shared, resource: &str, account: &str) -> Vec<Key> {
    let snap = shared.store.snapshot();
    let workspace = shared.store.paths().workspace.clone();
    let mut keys = Vec::new();
    for key in snap.keys() {
        let Some(Desired::Mcp(d)) = snap.get(&key) else {
            continue;
        };
        let resolved: Arc<McpServerSpec> =
            match crate::runtime::secrets::resolve_mcp(&shared.secrets, &d.spec, &workspace) {
                Ok(r) => r.spec,
                Err(_) => d.spec.clone(),
            };
        let Ok(url) = url_of(&resolved) else {
            continue;
        };
        if serves(resource, url) && OAuthEntry::of(&resolved).account == account {
            keys.push(key);
        }
    }
    keys
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

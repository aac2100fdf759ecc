//! List changes, told to each client: `notifications/{tools,prompts,
//! resources}/list_changed` when what *it* lists changed (coalesced, never
//! when it did not), on its session or on its `subscriptions/listen`
//! requests (2026-07-28); a client that moved from another controller
//! hears of what changed meanwhile.

use std::sync::Arc;

use rmcp::model::ServerNotification;
use rmcp::service::SubscriptionSink;
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use super::{ClientEntry, Gateway};
use crate::observe::clock::now_rfc3339;
use crate::observe::metrics::metrics;
use crate::support::sync::lock;

impl Gateway {
    /// Send `notifications/{tools,prompts,resources}/list_changed` to every
    /// client when the union changed since it was last told, coalesced;
    /// never when it did not (a client that connected after a change, while
    /// the notification was being coalesced, is not told about it).
    pub async fn run_broadcaster(self: Arc<Self>, cancel: CancellationToken) {
        tokio::spawn(self.clone().run_cache_pruner(cancel.clone()));
        let mut changes = self.registry.subscribe();
        let mut announced = self.registry.union().fingerprints;
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                changed = changes.changed() => if changed.is_err() { return },
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(self.config.coalesce) => {}
            }
            changes.mark_unchanged();
            let now = self.registry.union().fingerprints;
            // Per client: what differs from what it last saw.
            let mut due = Vec::new();
            for client in self.lock_clients().by_id.values_mut() {
                let notifiers = notifiers(client);
                if notifiers.is_empty() {
                    continue;
                }
                let now = self.fingerprints(&client.profile);
                let kinds = [0, 1, 2].map(|i| now[i] != client.seen[i]);
                if kinds.iter().any(|k| *k) {
                    client.seen = now;
                    client.report();
                    due.extend(notifiers.into_iter().map(|n| (n, kinds)));
                }
            }
            if now != announced {
                announced = now;
                *lock(&self.last_list_changed) = Some(now_rfc3339());
                metrics().list_changed();
                self.status.touch();
            }
            if due.is_empty() {
                continue;
            }
            tracing::info!(clients = due.len(), "list changed");
            for (notifier, kinds) in due {
                tokio::spawn(notifier.list_changed(kinds));
            }
        }
    }
}

impl Gateway {
    /// Client `id`, resumed, hears of the lists that differ from what it
    /// saw under the last controller, once the cold start is over and it
    /// has somewhere to hear it (its session, or a listen read again).
    pub(super) async fn catch_up(self: Arc<Self>, id: u64) {
        self.cold_start().await;
        let (due, kinds) = {
            let mut clients = self.lock_clients();
            let Some(entry) = clients.by_id.get_mut(&id) else {
                return;
            };
            let due = notifiers(entry);
            let now = self.fingerprints(&entry.profile);
            let kinds = [0, 1, 2].map(|i| now[i] != entry.seen[i]);
            if due.is_empty() || !kinds.iter().any(|k| *k) {
                return;
            }
            tracing::debug!(client = id, seen = ?entry.seen, ?now, "fingerprints of a resumed client's lists");
            entry.seen = now;
            entry.report();
            (due, kinds)
        };
        let lists: Vec<&str> = ["tools", "prompts", "resources"]
            .into_iter()
            .zip(kinds)
            .filter_map(|(name, changed)| changed.then_some(name))
            .collect();
        tracing::info!(
            client = id,
            lists = %lists.join(", "),
            "the lists changed while the session moved; telling it"
        );
        for notifier in due {
            notifier.list_changed(kinds).await;
        }
    }
}

/// Where `client` hears of list changes: its session, its listens.
fn notifiers(client: &ClientEntry) -> Vec<Notifier> {
    client
        .peer
        .iter()
        .cloned()
        .map(Notifier::Session)
        .chain(client.listeners.iter().cloned().map(Notifier::Listen))
        .collect()
}

/// Where a client hears of list changes.
enum Notifier {
    /// Its session (the initialize lifecycle).
    Session(Peer<RoleServer>),
    /// One of its `subscriptions/listen` requests (2026-07-28).
    Listen(SubscriptionSink),
}

impl Notifier {
    /// Send the `list_changed` notifications of the kinds (tools, prompts,
    /// resources) that changed.
    async fn list_changed(self, kinds: [bool; 3]) {
        match self {
            Notifier::Session(peer) => {
                if kinds[0] {
                    let _ = peer.notify_tool_list_changed().await;
                }
                if kinds[1] {
                    let _ = peer.notify_prompt_list_changed().await;
                }
                if kinds[2] {
                    let _ = peer.notify_resource_list_changed().await;
                }
            }
            Notifier::Listen(sink) => {
                use rmcp::model::{
                    PromptListChangedNotification, ResourceListChangedNotification,
                    ToolListChangedNotification,
                };
                let all = [
                    ServerNotification::ToolListChangedNotification(
                        ToolListChangedNotification::default(),
                    ),
                    ServerNotification::PromptListChangedNotification(
                        PromptListChangedNotification::default(),
                    ),
                    ServerNotification::ResourceListChangedNotification(
                        ResourceListChangedNotification::default(),
                    ),
                ];
                for (changed, notification) in kinds.into_iter().zip(all) {
                    // A kind the client did not subscribe to is refused
                    // by the sink: nothing to do.
                    if changed {
                        let _ = sink.send(notification).await;
                    }
                }
            }
        }
    }
}

//! Resource subscriptions per agent, and links to resources no server
//! lists.
//!
//! An agent subscribes to a URI (`resources/subscribe`, or the
//! `resourceSubscriptions` of a 2026-07-28 `subscriptions/listen`); the
//! subscription goes to the server that owns the URI (its listing, a
//! template it fits, a link it returned, or the one-server view's server)
//! once, however many agents hold it, and is withdrawn when the last one
//! lets go (or leaves). A new connection of the server is subscribed again.
//! `notifications/resources/updated` goes to the agents subscribed to that
//! URI of that server, and to no other.
//!
//! A `resource_link` in a tool's result names a resource its server may
//! not list: the link is remembered (the most recent [`LINKS_KEPT`]), so
//! that reading or subscribing to it goes to the server that returned it.

// `resources/subscribe` is legacy-only, but the servers behind Steward are
// spoken to on the initialize lifecycle, where it is how one subscribes.
#![allow(deprecated)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolResult, ClientRequest, ErrorData, RequestId, ServerNotification, SubscribeRequest,
    SubscribeRequestParams, UnsubscribeRequest, UnsubscribeRequestParams,
};
use tokio_util::sync::CancellationToken;

use super::Gateway;
use super::logging::Own;
use super::registry::Upstream;
use crate::support::sync::lock;

/// How many resource links are remembered.
pub const LINKS_KEPT: usize = 4096;

/// Who holds a subscription.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Holder {
    /// A client of the initialize lifecycle (`resources/subscribe`).
    Session(u64),
    /// One `subscriptions/listen` request of a client (its id, as JSON).
    Listen(u64, String),
}

/// A listen request's id as a [`Holder::Listen`] holds it.
pub fn listen_id(id: &RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

impl Holder {
    fn client(&self) -> u64 {
        match self {
            Holder::Session(id) | Holder::Listen(id, _) => *id,
        }
    }
}

/// The subscriptions and links of the endpoint.
#[derive(Debug, Default)]
pub struct Subscriptions {
    /// `(server, uri)` → who holds it.
    held: BTreeMap<(String, String), BTreeSet<Holder>>,
    /// `(uri, server)` of resource links, oldest first.
    links: VecDeque<(String, String)>,
}

impl Subscriptions {
    /// The server a tool's result linked `uri` to, most recent first.
    pub fn linked(&self, uri: &str) -> Option<&str> {
        self.links
            .iter()
            .rev()
            .find(|(linked, _)| linked == uri)
            .map(|(_, server)| server.as_str())
    }
}

fn subscribe_request(uri: &str) -> ClientRequest {
    ClientRequest::SubscribeRequest(SubscribeRequest::new(SubscribeRequestParams::new(uri)))
}

fn unsubscribe_request(uri: &str) -> ClientRequest {
    ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(UnsubscribeRequestParams::new(uri)))
}

/// Send Steward's own `request` to `up`.
async fn own_request(up: &Upstream, request: ClientRequest) -> Result<(), ErrorData> {
    up.handle
        .call(
            request,
            Arc::new(Own),
            None,
            Duration::from_secs(30),
            None,
            &CancellationToken::new(),
        )
        .await
        .map(drop)
        .map_err(|e| super::call::call_error(&up.server, e))
}

impl Gateway {
    fn subscriptions(&self) -> std::sync::MutexGuard<'_, Subscriptions> {
        lock(&self.subscriptions)
    }

    /// Remember the resource links in `result`, a tool result of `server`.
    pub(super) fn remember_links(&self, server: &str, result: &CallToolResult) {
        let links: Vec<String> = result
            .content
            .iter()
            .filter_map(|block| block.as_resource_link())
            .map(|link| link.uri.clone())
            .collect();
        if links.is_empty() {
            return;
        }
        let mut subscriptions = self.subscriptions();
        for uri in links {
            subscriptions.links.retain(|(linked, _)| *linked != uri);
            if subscriptions.links.len() >= LINKS_KEPT {
                subscriptions.links.pop_front();
            }
            subscriptions.links.push_back((uri, server.to_owned()));
        }
    }

    /// The server a tool's result linked `uri` to.
    pub fn linked(&self, uri: &str) -> Option<String> {
        self.subscriptions().linked(uri).map(str::to_owned)
    }

    /// `holder` subscribes to `uri` of the server `up`: the server is asked
    /// once, by the first holder.
    pub async fn subscribe(
        &self,
        up: &Upstream,
        uri: &str,
        holder: Holder,
    ) -> Result<(), ErrorData> {
        let key = (up.server.clone(), uri.to_owned());
        let first = {
            let mut subscriptions = self.subscriptions();
            let holders = subscriptions.held.entry(key.clone()).or_default();
            let first = holders.is_empty();
            holders.insert(holder.clone());
            first
        };
        if !first {
            return Ok(());
        }
        let asked = own_request(up, subscribe_request(uri)).await;
        if asked.is_err() {
            let mut subscriptions = self.subscriptions();
            if let Some(holders) = subscriptions.held.get_mut(&key) {
                holders.remove(&holder);
                if holders.is_empty() {
                    subscriptions.held.remove(&key);
                }
            }
        }
        asked
    }

    /// `holder` lets go of `uri` of `server` (all its URIs of all servers
    /// with `uri` none): the server is told once its last holder let go.
    pub fn unsubscribe(&self, server: Option<&str>, uri: Option<&str>, holder: &Holder) {
        let mut released = Vec::new();
        {
            let mut subscriptions = self.subscriptions();
            subscriptions.held.retain(|(s, u), holders| {
                let matches =
                    server.is_none_or(|server| server == s) && uri.is_none_or(|uri| uri == u);
                if matches && holders.remove(holder) && holders.is_empty() {
                    released.push((s.clone(), u.clone()));
                    return false;
                }
                true
            });
        }
        for (server, uri) in released {
            let Some(up) = self.registry.live(&server) else {
                continue;
            };
            tokio::spawn(async move {
                let _ = own_request(&up, unsubscribe_request(&uri)).await;
            });
        }
    }

    /// Client `client` left: its subscriptions go.
    pub(super) fn forget_subscriptions(&self, client: u64) {
        let holders: BTreeSet<Holder> = self
            .subscriptions()
            .held
            .values()
            .flatten()
            .filter(|h| h.client() == client)
            .cloned()
            .collect();
        for holder in holders {
            self.unsubscribe(None, None, &holder);
        }
    }

    /// A new connection of `server`: subscribed again to what is held.
    pub(super) fn resubscribe(&self, server: &str) {
        let uris: Vec<String> = self
            .subscriptions()
            .held
            .keys()
            .filter(|(s, _)| s == server)
            .map(|(_, uri)| uri.clone())
            .collect();
        if uris.is_empty() {
            return;
        }
        let Some(up) = self.registry.live(server) else {
            return;
        };
        tokio::spawn(async move {
            for uri in uris {
                if let Err(error) = own_request(&up, subscribe_request(&uri)).await {
                    tracing::debug!(server = %up.server, %uri, error = %error.message, "subscribe again");
                }
            }
        });
    }

    /// `notifications/resources/updated` of `server`: to its holders only.
    pub(super) fn updated(&self, server: &str, notification: ServerNotification) {
        let ServerNotification::ResourceUpdatedNotification(update) = &notification else {
            return;
        };
        let key = (server.to_owned(), update.params.uri.clone());
        let holders: Vec<Holder> = self
            .subscriptions()
            .held
            .get(&key)
            .map(|h| h.iter().cloned().collect())
            .unwrap_or_default();
        let clients = self.lock_clients();
        for holder in holders {
            let Some(client) = clients.by_id.get(&holder.client()) else {
                continue;
            };
            let notification = notification.clone();
            match &holder {
                Holder::Session(_) => {
                    if let Some(peer) = client.peer.clone() {
                        tokio::spawn(async move {
                            let _ = peer.send_notification(notification).await;
                        });
                    }
                }
                Holder::Listen(_, id) => {
                    let sink = client.listeners.iter().find(|s| listen_id(s.id()) == *id);
                    if let Some(sink) = sink.cloned() {
                        tokio::spawn(async move {
                            let _ = sink.send(notification).await;
                        });
                    }
                }
            }
        }
    }
}

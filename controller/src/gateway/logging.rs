//! Log lines per agent, and what belongs to no call.
//!
//! Each agent has its own level (`logging/setLevel` sets the agent's, not
//! the server's). Once some agent set one, a server is told the most
//! verbose level any agent that sees it wants — an agent that never set a
//! level counting as `info` — so that every agent can get what it asked,
//! and one agent's `error` never silences the others; a line emitted
//! during an agent's call goes to that agent (the relay routes it,
//! [`super::agent::AgentCaller`] filters it by the agent's level), any
//! other line to every agent that sees the server and whose level admits
//! it. An agent that never set a level gets every line that comes.
//!
//! The same broadcast carries the other notifications that belong to no
//! call; resource updates go to the agents subscribed
//! ([`super::subscriptions`]).

// Logging is deprecated by SEP-2577 (protocol 2026-07-28) but part of the
// initialize-lifecycle versions this endpoint speaks.
#![allow(deprecated)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    ClientRequest, LoggingLevel, ServerNotification, SetLevelRequest, SetLevelRequestParams,
};
use tokio_util::sync::CancellationToken;

use super::Gateway;
use super::agent::{admits, severity};
use crate::runtime::mcp::Caller;
use crate::support::sync::lock;

/// Steward's own requests (no agent behind them).
pub(super) struct Own;

impl Caller for Own {
    fn progress(
        &self,
        _: rmcp::model::ProgressNotificationParam,
    ) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(async {})
    }

    fn forward(
        &self,
        _: rmcp::model::ServerRequest,
        _: CancellationToken,
    ) -> futures::future::BoxFuture<
        'static,
        Result<rmcp::model::ClientResult, rmcp::model::ErrorData>,
    > {
        Box::pin(async {
            Err(rmcp::model::ErrorData::invalid_request(
                "no agent's call is in flight",
                None,
            ))
        })
    }
}

impl Gateway {
    /// The level each live server should be told: the most verbose one an
    /// agent that sees it wants (`info` for one that never asked); not
    /// told while no agent that sees it asked for a level.
    fn wanted_levels(&self) -> BTreeMap<String, LoggingLevel> {
        let clients = self.lock_clients();
        let mut wanted: BTreeMap<String, LoggingLevel> = BTreeMap::new();
        for up in self.registry.all_live() {
            let seeing: Vec<Option<LoggingLevel>> = clients
                .by_id
                .values()
                .filter(|c| c.profile.server.as_deref().is_none_or(|s| s == up.server))
                .map(|c| c.agent.level())
                .collect();
            if seeing.iter().all(Option::is_none) {
                continue;
            }
            let most = seeing
                .into_iter()
                .map(|level| level.unwrap_or(LoggingLevel::Info))
                .min_by_key(|level| severity(*level));
            if let Some(level) = most {
                wanted.insert(up.server.clone(), level);
            }
        }
        wanted
    }

    /// Tell the live servers (`only` that one, when given: a new
    /// connection) the level the agents want of them, where it changed.
    pub fn relevel(&self, only: Option<&str>) {
        if let Some(server) = only {
            lock(&self.levels).remove(server);
        }
        let wanted = self.wanted_levels();
        let due: Vec<(String, LoggingLevel)> = {
            let mut told = lock(&self.levels);
            let due: Vec<(String, LoggingLevel)> = wanted
                .into_iter()
                .filter(|(server, level)| told.get(server) != Some(level))
                .collect();
            told.extend(due.iter().cloned());
            due
        };
        for (server, level) in due {
            let Some(up) = self.registry.live(&server) else {
                continue;
            };
            tokio::spawn(async move {
                let request = ClientRequest::SetLevelRequest(SetLevelRequest::new(
                    SetLevelRequestParams::new(level),
                ));
                // Servers without logging answer with an error: ignored.
                let _ = up
                    .handle
                    .call(
                        request,
                        Arc::new(Own),
                        None,
                        Duration::from_secs(10),
                        None,
                        &CancellationToken::new(),
                    )
                    .await;
            });
        }
    }

    /// Send `notification` of `server`, which belongs to no call, to every
    /// client that sees `server` (a log line only where the client's level
    /// admits it), in the background: a slow client never holds the server
    /// that notified.
    pub(super) fn broadcast(&self, server: &str, notification: ServerNotification) {
        let line = match &notification {
            ServerNotification::LoggingMessageNotification(n) => Some(n.params.level),
            ServerNotification::ResourceUpdatedNotification(_) => {
                return self.updated(server, notification);
            }
            _ => None,
        };
        let peers: Vec<_> = self
            .lock_clients()
            .by_id
            .values()
            .filter(|c| c.profile.server.as_deref().is_none_or(|s| s == server))
            .filter(|c| line.is_none_or(|line| admits(c.agent.level(), line)))
            .filter_map(|c| c.peer.clone())
            .collect();
        for peer in peers {
            let notification = notification.clone();
            tokio::spawn(async move {
                let _ = peer.send_notification(notification).await;
            });
        }
    }
}

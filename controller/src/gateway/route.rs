//! Routing: which live connection serves an exposed name (tools, prompts)
//! or a resource URI, waiting (up to the start wait) while its server starts
//! or restarts, and why a name leads nowhere when it does. Every call path
//! — a direct call, `call_tool`, code mode's inner calls — routes here.

use std::sync::Arc;

use rmcp::model::ErrorData;
use steward_schema::resource::{Phase, Reason, ResourceKind};
use tokio::time::Instant;

use super::explain::{explain, explain_blocked};
use super::pins::Definition;
use super::profile::Naming;
use super::registry::{Union, Upstream};
use super::{Gateway, names};
use crate::desired::snapshot::Key;

/// Why a name leads nowhere.
pub enum Refusal {
    /// Its server cannot serve it now: a tool error with this text.
    Unavailable { server: String, why: String },
    /// Nobody has it: a protocol error with this text.
    Unknown(String),
}

/// What a server's status says about calling it.
pub enum Availability {
    Wait,
    Down(String),
}

/// The kinds of routed names.
#[derive(Clone, Copy)]
pub enum Kind {
    Tool,
    Prompt,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
        }
    }
}

impl Gateway {
    /// Why `server` is not live, or that it is worth waiting for.
    pub fn availability(&self, server: &str) -> Availability {
        let key = Key::mcp(server);
        let snap = self.store.snapshot();
        if !snap.contains(&key) {
            return Availability::Down(format!(
                "server \"{server}\" was removed from the configuration; its tools are gone"
            ));
        }
        match self.status.get(&key) {
            None => match snap.blocked(&key) {
                Some(b) => Availability::Down(explain_blocked(server, b.reason, &b.message)),
                None => Availability::Wait,
            },
            Some(s) => match s.phase {
                Phase::Pending | Phase::Starting | Phase::Stopping | Phase::Ready | Phase::Idle => {
                    Availability::Wait
                }
                Phase::Failed | Phase::Blocked => Availability::Down(explain(server, &s)),
            },
        }
    }

    /// Whether `server` waits for a sign-in (`AuthRequired`).
    pub fn waits_for_sign_in(&self, server: &str) -> bool {
        self.status
            .get(&Key::mcp(server))
            .is_some_and(|s| s.phase == Phase::Failed && s.reason == Some(Reason::AuthRequired))
    }

    /// Waits (up to the start wait) until `server` no longer waits for a
    /// sign-in: the controllers were told of one, and it connects again.
    pub async fn wait_past_sign_in(&self, server: &str) {
        let deadline = Instant::now() + self.config.start_wait;
        let mut changes = self.status.subscribe();
        loop {
            changes.borrow_and_update();
            if !self.waits_for_sign_in(server) {
                return;
            }
            if !matches!(
                tokio::time::timeout_at(deadline, changes.changed()).await,
                Ok(Ok(()))
            ) {
                return;
            }
        }
    }

    /// Whether a request that `up` closed under goes to its server's next
    /// connection: a restart or an idle stop swapped the connection (the
    /// request raced the drain) and the server is still worth waiting for.
    /// Asked once per request.
    pub fn worth_another_try(&self, up: &Upstream) -> bool {
        let swapped = self
            .registry
            .live(&up.server)
            .is_none_or(|now| !Arc::ptr_eq(now.handle.relay(), up.handle.relay()));
        swapped && matches!(self.availability(&up.server), Availability::Wait)
    }

    /// The server an unlisted exposed name points at, by its `server__`
    /// prefix (configured or removed servers only), and the rest of it.
    fn by_prefix(&self, exposed: &str, max_name_len: usize) -> Option<(String, String)> {
        let snap = self.store.snapshot();
        let removed = self.status.removed_names(ResourceKind::McpServer, &snap);
        snap.desired
            .mcp
            .keys()
            .chain(removed.iter())
            .filter_map(|server| {
                let prefix = names::assign([(server.as_str(), "")], max_name_len).remove(0);
                exposed
                    .strip_prefix(&prefix)
                    .map(|rest| (prefix.len(), server.clone(), rest.to_owned()))
            })
            .max_by_key(|(len, _, _)| *len)
            .map(|(_, server, rest)| (server, rest))
    }

    /// What a client naming things so lists now: the union, or one
    /// server's catalog under its own names.
    pub fn union_named(&self, naming: Naming<'_>) -> Arc<Union> {
        match naming {
            Naming::Prefixed(max_name_len) => self.registry.union_for(max_name_len),
            Naming::Own(server) => self.registry.union_of(server),
        }
    }

    /// The live upstream and original name behind `exposed` (named as
    /// `naming` says), waiting (up to the start wait) while its server
    /// starts or restarts.
    pub async fn resolve(
        &self,
        kind: Kind,
        exposed: &str,
        naming: Naming<'_>,
    ) -> Result<(Arc<Upstream>, String), Refusal> {
        let deadline = Instant::now() + self.config.start_wait;
        let mut changes = self.registry.subscribe();
        let mut demanded = false;
        loop {
            changes.borrow_and_update();
            let union = self.union_named(naming);
            let listed = match kind {
                Kind::Tool => union.tool(exposed),
                Kind::Prompt => union.prompt(exposed),
            }
            .map(|r| (r.server.clone(), r.original.clone()));
            let unlisted = || match naming {
                Naming::Prefixed(max_name_len) => self.by_prefix(exposed, max_name_len),
                // Its one server's, by the name the server gave it.
                Naming::Own(server) => Some((server.to_owned(), exposed.to_owned())),
            };
            let Some((server, original)) = listed.clone().or_else(unlisted) else {
                let known: Vec<&str> = match kind {
                    Kind::Tool => union.tool_names().collect(),
                    Kind::Prompt => union.prompts.iter().map(|p| p.name.as_str()).collect(),
                };
                return Err(Refusal::Unknown(unknown(kind, exposed, &known, naming)));
            };
            if let Some(up) = self.registry.live(&server) {
                let offered = match kind {
                    Kind::Tool => up.catalog.tools.iter().any(|t| t.name == original),
                    Kind::Prompt => up.catalog.prompts.iter().any(|p| p.name == original),
                };
                if offered {
                    return Ok((up, original));
                }
                let pinned = match kind {
                    Kind::Tool => Definition::Tool,
                    Kind::Prompt => Definition::Prompt,
                };
                if listed.is_none()
                    && let Some(why) = self.pins.refusal(pinned, &server, exposed, naming)
                {
                    return Err(Refusal::Unavailable { server, why });
                }
                if listed.is_none() {
                    let known: Vec<&str> = match kind {
                        Kind::Tool => union.tool_names().collect(),
                        Kind::Prompt => union.prompts.iter().map(|p| p.name.as_str()).collect(),
                    };
                    return Err(Refusal::Unknown(unknown(kind, exposed, &known, naming)));
                }
                // Listed but not offered by the live connection: the union is
                // being rebuilt; look again.
            } else if let Availability::Down(why) = self.availability(&server) {
                return Err(Refusal::Unavailable { server, why });
            } else if !std::mem::replace(&mut demanded, true) {
                // An idle server starts for it; one starting goes on.
                self.demand(&server);
            }
            if let Err(why) = self.wait_for_change(&server, deadline, &mut changes).await {
                return Err(Refusal::Unavailable { server, why });
            }
        }
    }

    /// The live upstream that owns `uri` (a listed resource, or one that fits
    /// a listed template; in a one-server view, its server), waiting (up to
    /// the start wait) while its server starts or restarts, as a call does.
    pub async fn resource_upstream(
        &self,
        uri: &str,
        naming: Naming<'_>,
    ) -> Result<Arc<Upstream>, ErrorData> {
        let deadline = Instant::now() + self.config.start_wait;
        let mut changes = self.registry.subscribe();
        let mut demanded = false;
        loop {
            changes.borrow_and_update();
            let union = self.registry.union();
            let linked = self.linked(uri);
            let owner = match naming {
                Naming::Own(server) => Some(server),
                // Listed, fitting a template, or linked by a tool's result.
                Naming::Prefixed(_) => union.resource_owner(uri).or(linked.as_deref()),
            };
            let server = owner.ok_or_else(|| {
                ErrorData::resource_not_found(
                    format!("no server of this workspace lists the resource {uri}"),
                    None,
                )
            })?;
            if let Some(up) = self.registry.live(server) {
                return Ok(up);
            }
            if let Availability::Down(why) = self.availability(server) {
                return Err(ErrorData::resource_not_found(why, None));
            }
            if !std::mem::replace(&mut demanded, true) {
                self.demand(server);
            }
            if let Err(why) = self.wait_for_change(server, deadline, &mut changes).await {
                return Err(ErrorData::resource_not_found(why, None));
            }
        }
    }

    /// The live upstream of `server`, waiting (up to the start wait) while
    /// it starts or restarts; why not when it cannot serve.
    pub async fn upstream_of(&self, server: &str) -> Result<Arc<Upstream>, String> {
        let deadline = Instant::now() + self.config.start_wait;
        let mut changes = self.registry.subscribe();
        let mut demanded = false;
        loop {
            changes.borrow_and_update();
            if let Some(up) = self.registry.live(server) {
                return Ok(up);
            }
            if let Availability::Down(why) = self.availability(server) {
                return Err(why);
            }
            if !std::mem::replace(&mut demanded, true) {
                self.demand(server);
            }
            self.wait_for_change(server, deadline, &mut changes).await?;
        }
    }

    /// Wait for the registry to change, until `deadline`: why not, when it
    /// will not (`server` is what a caller waits for).
    async fn wait_for_change<T>(
        &self,
        server: &str,
        deadline: Instant,
        changes: &mut tokio::sync::watch::Receiver<T>,
    ) -> Result<(), String> {
        match tokio::time::timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err("the controller is shutting down".to_owned()),
            Err(_) => Err(format!(
                "server \"{server}\" did not become ready within {}; see `steward describe {server}`",
                humantime::format_duration(self.config.start_wait)
            )),
        }
    }
}

/// "unknown tool" with the closest names.
fn unknown(kind: Kind, exposed: &str, known: &[&str], naming: Naming<'_>) -> String {
    let close = names::close_names(exposed, known.iter().copied(), 5);
    let noun = kind.noun();
    let nobody = match naming {
        Naming::Prefixed(_) => "no server of this workspace offers it".to_owned(),
        Naming::Own(server) => format!("server \"{server}\" does not offer it"),
    };
    if close.is_empty() {
        format!("unknown {noun} \"{exposed}\": {nobody}")
    } else {
        format!(
            "unknown {noun} \"{exposed}\": {nobody} (did you mean: {})",
            close.join(", ")
        )
    }
}

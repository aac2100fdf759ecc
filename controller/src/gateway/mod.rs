//! The agent endpoint: one MCP server that offers every
//! agent the tools, prompts and resources of every Ready MCP server of the
//! workspace, and code intelligence as one `lsp` tool.
//!
//! It is a consumer at the end of the flow, beside `status`: it reads the
//! [`registry::Registry`] that reconcile publishes live connections to, and
//! the status store for why a server is not live. It never decides
//! anything reconcile decides, and reconcile never waits on a client: a
//! call to a server that is (re)starting waits on the registry, not on the
//! queue.
//!
//! - [`names`]: exposed names (`server__tool`, sanitized, collisions);
//!   [`one`]: the one-server view (one server under its own names).
//! - [`registry`]: live connections, their filtered catalogs, the union.
//! - [`profile`]: what one client asked to see (`--expose`,
//!   `--max-name-len`); [`view`]: the union through a profile.
//! - [`search`]: the ranking index; [`finder`]: the `search_tools` and
//!   `call_tool` tools over it.
//! - [`cost`]: what each tool's definition costs an agent (`steward tools`).
//! - [`session`]: one client's MCP session (lists, calls, pass-through);
//!   [`instructions`]: the servers' instructions, combined;
//!   [`broadcaster`]: list changes, told to each client.
//! - [`agent`]: who a client is to the servers' requests and log lines
//!   (capabilities per agent, routing of what a server sends for a call);
//!   [`logging`]: log levels per agent; [`subscriptions`]: resource
//!   subscriptions per agent, resource links; [`task_handles`]: task
//!   ids per server; [`tasks`]: `tasks/*`, routed by them
//!   ([`legacy_tasks`]: those of 2025-11-25); [`bridge`]:
//!   requests of
//!   2026-07-28 agents to servers of the initialize lifecycle
//!   (`input_required`); [`reads`]: `prompts/get` and `resources/read`.
//! - [`route`]: which live connection serves a name, waiting while its
//!   server (re)starts; [`call`]: the one path of a `tools/call` (counted,
//!   traced, forwarded), for direct calls, `call_tool` and code mode.
//! - [`code`]: code mode, `describe_tools` (TypeScript declarations) and
//!   `run_code` (a bounded JavaScript engine whose tool calls take [`call`]).
//! - [`serve`]: the transports (stdio bridge, Unix socket, streamable HTTP);
//!   [`handover`]: an attached `steward mcp` passes the agent's stdio over.
//! - [`lsp_tool`]: the `lsp` tool (Qwen Code's interface) over the language
//!   servers.
//! - [`pins`]: tool definitions pinned on first use; changed ones are
//!   quarantined before they reach the registry.
//! - [`cache`]: each server's last catalog, listed at once when the next
//!   controller starts ([`Gateway::offer_cached`]) while calls wait for the
//!   server.
//!
//! Every client shares the same server processes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::Tool;
use rmcp::service::SubscriptionSink;
use rmcp::{Peer, RoleServer};
use steward_schema::resource::{
    GatewaySession, GatewayStatus, Item, McpServerSpec, Phase, WorkspaceStatus,
};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::desired::snapshot::{DesiredStore, Key};
use crate::engine::publish::{IdleCatalog, Publish};
use crate::gateway::lsp::LspService;
use crate::observe::metrics::metrics;
use crate::observe::status::StatusStore;
use crate::observe::view::Decoration;
use crate::runtime::lsp::LspConnection;
use crate::runtime::mcp::{Broadcast, McpHandle, McpLists};
use crate::support::sync::lock;

pub mod agent;
pub mod agent_wire;
pub mod bridge;
pub mod broadcaster;
pub mod cache;
pub mod call;
pub mod code;
pub mod cost;
pub mod explain;
pub mod finder;
pub mod handover;
pub mod http_sessions;
pub mod instructions;
pub mod legacy_tasks;
pub mod logging;
pub mod lsp;
pub mod lsp_tool;
pub mod names;
pub mod one;
pub mod pins;
pub mod profile;
pub mod reads;
pub mod registry;
pub mod resume;
pub mod route;
pub mod search;
pub mod serve;
pub mod session;
pub mod sign_in;
pub mod subscriptions;
pub mod task_handles;
pub mod tasks;
pub mod view;

use cache::{CachedCatalog, CatalogCache};
use pins::{PinMode, Pins};
use profile::Profile;
use registry::{Registry, ServerCatalog};

/// Tunables of the agent endpoint.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// Items per page of every list.
    pub page_size: usize,
    /// How long a call waits for its server to start or restart.
    pub start_wait: Duration,
    /// `list_changed` notifications of one moment are sent once, this long
    /// after the first change.
    pub coalesce: Duration,
    /// An HTTP session with no open response (GET stream) and no request
    /// for this long is closed: its client left without a DELETE.
    pub http_idle: Duration,
    /// Which servers' tool definitions are pinned (`--pin-tools`).
    pub pin_tools: PinMode,
    /// `QWEN_CODE_MCP_TOOL_IDLE_TIMEOUT_MS` (ms), used when no settings
    /// layer sets `mcp.toolIdleTimeoutMs`.
    pub tool_idle_env: Option<u64>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            page_size: 100,
            start_wait: Duration::from_secs(35),
            coalesce: Duration::from_millis(50),
            http_idle: Duration::from_secs(300),
            pin_tools: PinMode::All,
            tool_idle_env: None,
        }
    }
}

#[derive(Debug)]
struct ClientEntry {
    transport: &'static str,
    profile: Profile,
    /// Who it is to the servers' requests and log lines.
    agent: Arc<agent::Agent>,
    /// A client of the initialize lifecycle, once initialized.
    peer: Option<Peer<RoleServer>>,
    /// A client of the 2026-07-28 lifecycle: its open `subscriptions/listen`
    /// requests, by request id (list changes go there, not to a session).
    listeners: Vec<SubscriptionSink>,
    /// The union's fingerprints (tools, prompts, resources) when this
    /// client attached or was last notified: a list changed notification
    /// goes to it only when the union differs (an agent that attached just
    /// after a change already lists it).
    seen: [u64; 3],
    /// Where the session's state goes for the `steward mcp` that handed it
    /// over, so that it can resume it under the next controller.
    handback: Option<resume::HandbackTx>,
    /// It went on from another controller: `seen` is what it saw there.
    resumed: bool,
}

impl ClientEntry {
    /// Tell the bridge (if any) what the client has seen now.
    fn report(&self) {
        if let Some(handback) = &self.handback {
            let initialize = self
                .peer
                .as_ref()
                .and_then(|p| p.peer_info())
                .map(|info| (*info).clone());
            handback.send_if_modified(|h| {
                let initialize = initialize.or_else(|| h.initialize.clone());
                let changed = h.initialize != initialize || h.seen != self.seen;
                h.initialize = initialize;
                h.seen = self.seen;
                changed
            });
        }
    }
}

#[derive(Debug, Default)]
struct Clients {
    next: u64,
    by_id: BTreeMap<u64, ClientEntry>,
}

/// The endpoint's shared state (see the module doc).
pub struct Gateway {
    registry: Arc<Registry>,
    status: Arc<StatusStore>,
    store: Arc<DesiredStore>,
    lsp: Arc<LspService>,
    pins: Arc<Pins>,
    cache: Arc<CatalogCache>,
    config: GatewayConfig,
    clients: Mutex<Clients>,
    /// Number of attached clients (a `steward mcp` controller exits at 0).
    attached: watch::Sender<usize>,
    listen: OnceLock<String>,
    last_list_changed: Mutex<Option<String>>,
    /// The cold start has finished (see [`Gateway::cold_start`]).
    started: AtomicBool,
    /// Sign-ins through agents ([`sign_in`]).
    sign_ins: sign_in::AgentSignIns,
    /// When the catalog cache listed some server at start: the MCP servers
    /// the cold start starts (see [`Gateway::offer_cached`]).
    warm: Mutex<Option<BTreeSet<String>>>,
    /// Every tool each server offered in its last publication, before
    /// filters and pins (for [`cost`]).
    offered: Mutex<BTreeMap<String, Arc<Vec<Tool>>>>,
    /// The controller is stopping: handed-over sessions go back to their
    /// `steward mcp` ([`resume`]).
    draining: watch::Sender<bool>,
    /// Handed-over sessions not yet handed back.
    handing: watch::Sender<usize>,
    /// Where a call that needs an MCP server that is not live says so (the
    /// engine's main loop starts an idle server; see [`Self::demand`]).
    demand: OnceLock<mpsc::UnboundedSender<String>>,
    /// Who holds which resource subscription, and resource links
    /// ([`subscriptions`]).
    subscriptions: Mutex<subscriptions::Subscriptions>,
    /// Requests of 2026-07-28 agents parked for their input ([`bridge`]).
    bridge: Arc<bridge::Bridge>,
    /// Servers that asked their clients for input on a connection that
    /// cannot say for which call: their next connections serialize the
    /// calls of different agents from the start (see the relay).
    asking: Mutex<BTreeSet<String>>,
    /// The log level each server was last told ([`logging`]).
    #[allow(deprecated)]
    levels: Mutex<BTreeMap<String, rmcp::model::LoggingLevel>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("clients", &*self.lock_clients())
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// Sign-ins through agents: the engine gives them the secrets.
    pub fn sign_ins(&self) -> &sign_in::AgentSignIns {
        &self.sign_ins
    }

    pub fn new(
        registry: Arc<Registry>,
        status: Arc<StatusStore>,
        store: Arc<DesiredStore>,
        lsp: Arc<LspService>,
        config: GatewayConfig,
    ) -> Arc<Gateway> {
        let pins = Arc::new(Pins::load(
            store.paths().tool_pins_file(),
            &store.paths().workspace,
            config.pin_tools,
            status.clone(),
        ));
        let cache = Arc::new(CatalogCache::load(
            store.paths().catalog_cache_file(),
            &store.paths().workspace,
        ));
        Arc::new(Gateway {
            registry,
            status,
            store,
            lsp,
            pins,
            cache,
            config,
            clients: Mutex::new(Clients::default()),
            attached: watch::Sender::new(0),
            listen: OnceLock::new(),
            last_list_changed: Mutex::new(None),
            started: AtomicBool::new(false),
            sign_ins: sign_in::AgentSignIns::default(),
            warm: Mutex::new(None),
            offered: Mutex::new(BTreeMap::new()),
            draining: watch::Sender::new(false),
            handing: watch::Sender::new(0),
            demand: OnceLock::new(),
            bridge: Arc::default(),
            subscriptions: Mutex::default(),
            asking: Mutex::default(),
            levels: Mutex::new(BTreeMap::new()),
        })
    }

    fn lock_clients(&self) -> MutexGuard<'_, Clients> {
        lock(&self.clients)
    }

    pub fn workspace(&self) -> PathBuf {
        self.store.paths().workspace.clone()
    }

    /// The pinned tool definitions (`steward approve NAME --tools`).
    pub fn pins(&self) -> &Arc<Pins> {
        &self.pins
    }

    /// Where server notifications that belong to no call go: the clients
    /// that see the server (and whose level admits a log line).
    pub fn broadcast_hook(self: &Arc<Self>) -> Broadcast {
        let gateway: Weak<Gateway> = Arc::downgrade(self);
        Arc::new(move |server, notification| {
            if let Some(gateway) = gateway.upgrade() {
                gateway.broadcast(server, notification);
            }
        })
    }

    /// Where calls send the names of the MCP servers they wait for (the
    /// engine receives them like control requests; the first set wins).
    pub fn set_demand(&self, demand: mpsc::UnboundedSender<String>) {
        let _ = self.demand.set(demand);
    }

    /// A call waits for MCP server `name`, which is not live: ask the
    /// engine to start it if it is idle (nothing for one already starting).
    fn demand(&self, name: &str) {
        if let Some(demand) = self.demand.get() {
            let _ = demand.send(name.to_owned());
        }
    }

    /// The streamable-HTTP address, for status.
    pub fn set_listen(&self, address: String) {
        let _ = self.listen.set(address);
        self.status.touch();
    }

    /// A client connected over `transport`, seeing the workspace through
    /// `profile`; it counts as attached until the ticket is dropped.
    /// Its state goes to `handback` too, when given (see [`resume`]).
    pub fn attach(
        self: &Arc<Self>,
        transport: &'static str,
        profile: Profile,
        handback: Option<resume::HandbackTx>,
    ) -> Ticket {
        let seen = self.fingerprints(&profile);
        let (expose, max_name_len, server) =
            (profile.expose, profile.max_name_len, profile.server.clone());
        let id = {
            let mut clients = self.lock_clients();
            clients.next += 1;
            let id = clients.next;
            let entry = ClientEntry {
                transport,
                profile,
                agent: Arc::new(agent::Agent::new(id)),
                peer: None,
                listeners: Vec::new(),
                seen,
                handback,
                resumed: false,
            };
            // What it sees from the start: a stop right after its listen
            // was acknowledged (before the listen is recorded) must not
            // leave the bridge with nothing.
            entry.report();
            clients.by_id.insert(id, entry);
            self.attached.send_replace(clients.by_id.len());
            id
        };
        metrics().client_attached(transport);
        tracing::info!(transport, client = id, %expose, max_name_len, server = server.as_deref(), "agent client attached");
        self.status.touch();
        Ticket {
            gateway: self.clone(),
            id,
        }
    }

    fn offered(&self) -> BTreeMap<String, Arc<Vec<Tool>>> {
        lock(&self.offered).clone()
    }

    /// What a client with `profile` lists now, for change detection.
    fn fingerprints(&self, profile: &Profile) -> [u64; 3] {
        view::fingerprints(&self.union_named(profile.naming()), profile)
    }

    /// Wait (at most the start wait) for the controller's cold start to
    /// finish, so that a list answered while the servers are still starting
    /// does not show an empty workspace. Agents list once when they connect
    /// (Qwen Code even drops a server whose lists are all empty), and an
    /// agent that runs `steward mcp` connects before any server is Ready.
    ///
    /// With a warm catalog cache the wait ends as soon as every MCP server
    /// the cold start starts is listed (live or cached) or has settled
    /// without being Ready (failed, blocked, removed): all cached, no wait.
    pub async fn cold_start(&self) {
        if self.started.load(Ordering::Relaxed) {
            return;
        }
        let deadline = tokio::time::Instant::now() + self.config.start_wait;
        let mut changes = self.status.subscribe();
        loop {
            changes.borrow_and_update();
            if self.status.reloaded_once() {
                self.started.store(true, Ordering::Relaxed);
                return;
            }
            if self.all_listed_or_settled() {
                return;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                // Closed, or waited long enough: answer with what is Ready.
                Ok(Err(_)) | Err(_) => return,
            }
        }
    }

    /// With a warm cache (see [`Self::cold_start`]): whether nothing the
    /// cold start starts is still on its way without a catalog to list.
    fn all_listed_or_settled(&self) -> bool {
        let warm = lock(&self.warm);
        let Some(starting) = warm.as_ref() else {
            return false;
        };
        let snap = self.store.snapshot();
        starting.iter().all(|name| {
            let key = Key::mcp(name);
            !snap.contains(&key)
                || self.registry.listed(name)
                || matches!(
                    self.status.get(&key).map(|s| s.phase),
                    Some(Phase::Failed | Phase::Blocked)
                )
        })
    }

    /// At start, before any client attaches: list each admitted MCP server
    /// that has a cached catalog for its `configHash` (through its filters
    /// and pins), while it starts; calls wait for it. `stopped`: the servers
    /// the user stopped, which do not start. When every server that starts
    /// is listed so and a language server starts too, the `lsp` tool is
    /// listed as well (its calls wait for the language server likewise).
    pub fn offer_cached(&self, stopped: &BTreeSet<Key>) {
        let snap = self.store.snapshot();
        for server in self.cache.servers() {
            if !snap.desired.mcp.contains_key(&server) {
                // Gone from the configuration: dropped with the next write.
                self.cache.remove(&server, false);
            }
        }
        let starts = |key: &Key| snap.blocked(key).is_none() && !stopped.contains(key);
        let mut starting = BTreeSet::new();
        let mut listed = 0;
        for (name, desired) in &snap.desired.mcp {
            if !starts(&Key::mcp(name)) {
                continue;
            }
            starting.insert(name.clone());
            let spec = &desired.spec;
            let Some(entry) = self.cache.get(name, &spec.config_hash) else {
                continue;
            };
            let Some(lists) = self
                .pins
                .screen(name, &entry.lists(), &entry.config_hash, spec)
            else {
                continue;
            };
            lock(&self.offered).insert(name.clone(), Arc::new(lists.tools.clone()));
            let catalog = ServerCatalog {
                instructions: entry.instructions.clone(),
                ..ServerCatalog::filtered(&lists, spec)
            };
            self.registry.offer_cached(name, catalog, &spec.config_hash);
            listed += 1;
        }
        if listed == 0 {
            return;
        }
        let lsp_starts =
            snap.desired.lsp_enabled && snap.desired.lsp.keys().any(|name| starts(&Key::lsp(name)));
        if listed == starting.len() && lsp_starts {
            self.registry.set_lsp_expected(true);
        }
        tracing::info!(
            cached = listed,
            starting = starting.len(),
            "listing the cached catalogs of the servers while they start"
        );
        *lock(&self.warm) = Some(starting);
    }

    /// Withdraw each cached catalog that may not be listed any more: its
    /// server left the configuration, is not admitted, is to run another
    /// configuration, failed or was blocked (the engine withdraws the
    /// servers whose start it stops; this covers a change that comes before
    /// a start began). Likewise the listed `lsp` tool once no language
    /// server is starting any more.
    fn prune_cached(&self) {
        let cached = self.registry.cached();
        let lsp_expected = self.registry.lsp_expected();
        if cached.is_empty() && !lsp_expected {
            return;
        }
        let snap = self.store.snapshot();
        let phase = |key: &Key| self.status.get(key).map(|s| s.phase);
        for (name, config_hash) in cached {
            let key = Key::mcp(&name);
            // An idle server's listing is the engine's: after an edit its
            // reconcile lists the catalog again under the new configuration
            // (or withdraws it); withdrawing it here first would empty the
            // agent's list for a moment and tell it so twice.
            let idle = phase(&key) == Some(Phase::Idle);
            let keep = snap
                .desired
                .mcp
                .get(&name)
                .is_some_and(|d| d.spec.config_hash == config_hash || idle)
                && snap.blocked(&key).is_none()
                && !matches!(phase(&key), Some(Phase::Failed | Phase::Blocked));
            if !keep {
                tracing::debug!(server = %name, "cached catalog withdrawn");
                self.registry.withdraw_cached(&name);
            }
        }
        if lsp_expected {
            let starting = snap.desired.lsp_enabled
                && snap.desired.lsp.keys().any(|name| {
                    let key = Key::lsp(name);
                    snap.blocked(&key).is_none()
                        && matches!(
                            self.status.get(&key).map(|s| s.phase),
                            None | Some(Phase::Pending | Phase::Starting)
                        )
                });
            if !starting {
                self.registry.set_lsp_expected(false);
            }
        }
    }

    /// While anything is listed from the cache, look again on every change
    /// of status (see [`Self::prune_cached`]).
    async fn run_cache_pruner(self: Arc<Self>, cancel: CancellationToken) {
        let mut changes = self.status.subscribe();
        loop {
            changes.borrow_and_update();
            self.prune_cached();
            if self.registry.cached().is_empty() && !self.registry.lsp_expected() {
                return;
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                changed = changes.changed() => if changed.is_err() { return },
            }
        }
    }

    /// Write the catalog cache now if a background write is still due (at
    /// shutdown: the runtime may drop a write queued but not started).
    pub fn flush_cache(&self) {
        if let Err(error) = self.cache.save() {
            tracing::warn!(%error, "the last catalogs are not cached");
        }
    }

    /// Whether the controller is stopping and handed-over sessions go back
    /// to their `steward mcp`.
    pub fn draining(&self) -> watch::Receiver<bool> {
        self.draining.subscribe()
    }

    /// A handed-over session is being served until the guard drops.
    pub fn handing(self: &Arc<Self>) -> Handing {
        self.handing.send_modify(|n| *n += 1);
        Handing {
            gateway: self.clone(),
        }
    }

    /// Hand every handed-over session back to its `steward mcp` (each
    /// lets the requests it read be answered first, for at most `wait`),
    /// before the servers stop.
    pub async fn hand_back(&self, wait: Duration) {
        // No new attachment: `steward mcp` waits for the next controller.
        let _ = std::fs::remove_file(self.store.paths().mcp_socket_path());
        self.draining.send_replace(true);
        let mut handing = self.handing.subscribe();
        let sessions = *handing.borrow();
        if sessions == 0 {
            return;
        }
        tracing::info!(
            sessions,
            "handing the agents' sessions back for the next controller"
        );
        let grace = wait + Duration::from_secs(1);
        let _ = tokio::time::timeout(grace, handing.wait_for(|n| *n == 0)).await;
    }

    /// The number of attached clients, as it changes.
    pub fn attached(&self) -> watch::Receiver<usize> {
        self.attached.subscribe()
    }
}

/// The engine publishes live connections here: MCP connections into the
/// registry, language servers into the LSP service (which keeps the
/// registry's `lsp` flag in step).
impl Publish for Gateway {
    fn mcp_ready(&self, name: &str, handle: &McpHandle, lists: &McpLists, spec: &McpServerSpec) {
        lock(&self.offered).insert(name.to_owned(), Arc::new(lists.tools.clone()));
        self.remember_asking(name);
        // Known to ask from an earlier run of the controller, too.
        if self.cache.asks(name, &spec.config_hash) {
            lock(&self.asking).insert(name.to_owned());
        }
        let asks = lock(&self.asking).contains(name);
        if asks {
            handle.relay().serialize_agents();
        }
        let admitted = self.pins.admit(name, lists, spec);
        self.registry.publish(name, handle, &admitted, spec);
        // A new connection hears the agents' log level and subscriptions.
        self.relevel(Some(name));
        self.resubscribe(name);
        // What the server offers, before filters and pins: the next
        // controller screens it through the filters and pins of its day.
        let server_info = handle.peer.peer_info().and_then(|i| i.server_info.clone());
        let mut entry =
            CachedCatalog::new(&spec.config_hash, lists, handle.instructions(), server_info);
        entry.asks = asks;
        self.cache.store(name, entry);
    }

    fn mcp_restarting(&self, name: &str) {
        self.remember_asking(name);
        self.registry.restarting(name);
    }

    fn mcp_stopping(&self, name: &str) {
        self.remember_asking(name);
        self.registry.stopping(name);
    }

    fn mcp_withdrawn(&self, name: &str) {
        self.remember_asking(name);
        self.registry.withdraw(name);
    }

    fn mcp_removed(&self, name: &str) {
        lock(&self.asking).remove(name);
        lock(&self.offered).remove(name);
        self.registry.forget(name);
        self.cache.remove(name, true);
    }

    fn mcp_idle(&self, name: &str, spec: &McpServerSpec) -> Option<IdleCatalog> {
        // After an edit, what it offered under the configuration it last
        // ran: listed until a call starts it under this one.
        let screened = self.cache.last(name).and_then(|entry| {
            let lists = self
                .pins
                .screen(name, &entry.lists(), &entry.config_hash, spec)?;
            Some((lists, entry))
        });
        let Some((lists, entry)) = screened else {
            self.registry.withdraw_cached(name);
            return None;
        };
        lock(&self.offered).insert(name.to_owned(), Arc::new(lists.tools.clone()));
        let catalog = ServerCatalog {
            instructions: entry.instructions.clone(),
            ..ServerCatalog::filtered(&lists, spec)
        };
        self.registry.idle(name, catalog, &spec.config_hash);
        Some(IdleCatalog {
            tools: lists.tools.iter().map(|t| t.name.to_string()).collect(),
            prompts: lists.prompts.iter().map(|p| p.name.clone()).collect(),
            earlier: entry.config_hash != spec.config_hash,
        })
    }

    fn lsp_ready<'a>(&'a self, name: &'a str, conn: Arc<LspConnection>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.lsp.publish(name, conn).await;
        })
    }

    fn lsp_gone(&self, name: &str, conn: &Arc<LspConnection>) {
        self.lsp.unpublish_if(name, conn);
    }

    fn lsp_withdrawn(&self, name: &str) {
        self.lsp.unpublish(name);
    }

    fn lsp_removed(&self, name: &str) {
        self.lsp.forget(name);
    }
}

impl Decoration for Gateway {
    /// What [`Self::decorate`] adds changes only when this does (client
    /// attach and detach, `list_changed` and `listen` also move the status
    /// store's version).
    fn version(&self) -> (u64, u64) {
        (self.registry.version(), self.registry.calls_version())
    }

    /// Fill in what the endpoint knows: `controller.gateway`, each
    /// McpServer's `status.calls`, and its pinned tool definitions.
    fn decorate(&self, doc: &mut WorkspaceStatus) {
        self.pins.decorate(doc);
        let calls = self.registry.calls();
        let catalogs = self.catalogs();
        for item in &mut doc.items {
            if let Item::McpServer(server) = item {
                let name = &server.metadata.name;
                if let Some(counts) = calls.get(name) {
                    server.status.calls = Some(*counts);
                }
                server.status.catalog = catalogs.get(name).copied();
            }
        }
        let union = self.registry.union();
        let mut clients: BTreeMap<String, u64> = BTreeMap::new();
        let mut sessions = Vec::new();
        for c in self.lock_clients().by_id.values() {
            *clients.entry(c.transport.to_owned()).or_default() += 1;
            sessions.push(GatewaySession {
                transport: c.transport.to_owned(),
                expose: c.profile.expose.to_string(),
                max_name_len: c.profile.max_name_len as u64,
                server: c.profile.server.as_deref().map(str::to_owned),
            });
        }
        doc.controller.gateway = Some(GatewayStatus {
            clients,
            sessions,
            listen: self.listen.get().cloned(),
            tools: (union.tools.len() + usize::from(union.lsp)) as u64,
            last_list_changed: lock(&self.last_list_changed).clone(),
            conflicts: union.conflicts.clone(),
        });
    }
}

impl Gateway {
    /// Whether the live connection of `name` serializes the calls of
    /// different agents: remembered for its next connections, and in the
    /// catalog cache for the next controller's.
    fn remember_asking(&self, name: &str) {
        if self
            .registry
            .live(name)
            .is_some_and(|up| up.handle.relay().serialized())
            && lock(&self.asking).insert(name.to_owned())
        {
            self.cache.note_asks(name);
        }
    }
}

/// A handed-over session being served (see [`Gateway::handing`]).
#[derive(Debug)]
pub struct Handing {
    gateway: Arc<Gateway>,
}

impl Drop for Handing {
    fn drop(&mut self) {
        self.gateway
            .handing
            .send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// One attached client; dropping it detaches the client.
#[derive(Debug)]
pub struct Ticket {
    gateway: Arc<Gateway>,
    id: u64,
}

impl Ticket {
    /// Who the client is to the servers' requests and log lines.
    pub fn agent(&self) -> Arc<agent::Agent> {
        match self.gateway.lock_clients().by_id.get(&self.id) {
            Some(entry) => entry.agent.clone(),
            None => Arc::new(agent::Agent::new(self.id)),
        }
    }

    /// The client finished `initialize`: notifications may go to it.
    pub fn set_peer(&self, peer: Peer<RoleServer>) {
        let mut clients = self.gateway.lock_clients();
        if let Some(entry) = clients.by_id.get_mut(&self.id) {
            entry.seen = self.gateway.fingerprints(&entry.profile);
            entry.peer = Some(peer);
            entry.report();
        }
    }

    /// The client goes on from another controller ([`resume`]): it is
    /// initialized (`peer`, none for a client of the 2026-07-28 lifecycle)
    /// and last saw the lists `seen`. Once the cold start is over it hears
    /// `list_changed` for each list that differs (on its session, or on the
    /// listens it had open, which the next controller reads again first).
    pub fn resume(&self, peer: Option<Peer<RoleServer>>, seen: Option<[u64; 3]>) {
        {
            let mut clients = self.gateway.lock_clients();
            if let Some(entry) = clients.by_id.get_mut(&self.id) {
                entry.seen = seen.unwrap_or_else(|| self.gateway.fingerprints(&entry.profile));
                entry.peer = peer;
                entry.resumed = true;
                entry.report();
            }
        }
        tokio::spawn(self.gateway.clone().catch_up(self.id));
    }

    /// A `subscriptions/listen` request of this client opened: list changes
    /// go to it until [`Self::unlisten`].
    pub fn listen(&self, sink: SubscriptionSink) {
        let mut clients = self.gateway.lock_clients();
        let Some(entry) = clients.by_id.get_mut(&self.id) else {
            return;
        };
        if entry.peer.is_none() && entry.listeners.is_empty() && !entry.resumed {
            // What it lists from now on is what it is told about.
            entry.seen = self.gateway.fingerprints(&entry.profile);
            entry.report();
        }
        entry.listeners.push(sink);
        if entry.resumed {
            tokio::spawn(self.gateway.clone().catch_up(self.id));
        }
    }

    /// The `subscriptions/listen` request `id` ended.
    pub fn unlisten(&self, id: &rmcp::model::RequestId) {
        if let Some(entry) = self.gateway.lock_clients().by_id.get_mut(&self.id) {
            entry.listeners.retain(|sink| sink.id() != id);
        }
    }

    /// The client asked for `profile` when it initialized (HTTP clients
    /// give it in the endpoint's query string).
    pub fn set_profile(&self, profile: Profile) {
        let mut clients = self.gateway.lock_clients();
        if let Some(entry) = clients.by_id.get_mut(&self.id) {
            entry.seen = self.gateway.fingerprints(&profile);
            entry.profile = profile;
        }
        drop(clients);
        self.gateway.status.touch();
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.gateway.forget_subscriptions(self.id);
        let left = {
            let mut clients = self.gateway.lock_clients();
            if let Some(gone) = clients.by_id.remove(&self.id) {
                metrics().client_detached(gone.transport);
            }
            clients.by_id.len()
        };
        self.gateway.attached.send_replace(left);
        tracing::info!(client = self.id, attached = left, "agent client detached");
        self.gateway.status.touch();
    }
}

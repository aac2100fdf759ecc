//! The registry of live MCP connections: reconcile publishes to it (as it
//! publishes status), the agent endpoint reads it.
//!
//! One slot per MCP server that has (or just had) a live connection:
//! - `Live`: the connection callers forward through, with the server's
//!   catalog after `includeTools` / `excludeTools`;
//! - `Restarting`: its configuration changed and a new process is on its
//!   way; new calls wait for it, and the old catalog stays listed so that a
//!   restart that yields the same tools changes nothing an agent sees;
//! - `Cached`: the controller just started and the server is starting, or
//!   the server is idle (`--start lazy`, `--idle-stop`); what it offered the
//!   last time it ran this configuration (the catalog cache,
//!   [`super::cache`]) is listed, and calls wait for it as for a restart
//!   (an idle server is started by their demand).
//!
//! No slot means not live: the status store says why (starting, failed,
//! blocked, removed). Every change bumps a version that waiting callers and
//! the `list_changed` broadcaster watch. The union of all catalogs, with the
//! exposed names ([`super::names`]), is rebuilt only when a catalog changes.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use rmcp::model::{Prompt, Resource, ResourceTemplate, Tool};
use serde::Serialize;
use steward_schema::resource::{CallCounts, CatalogSource, McpServerSpec};
use tokio::sync::watch;

use super::search::{SearchEntry, ToolIndex};
use super::{instructions, names};
use crate::runtime::mcp::{McpHandle, McpLists};

/// What one server exposes, after its filters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerCatalog {
    pub tools: Vec<Tool>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
    /// What the server's `initialize` answer told its clients.
    pub instructions: Option<String>,
}

impl ServerCatalog {
    /// `lists` after the spec's `includeTools` / `excludeTools`.
    pub fn filtered(lists: &McpLists, spec: &McpServerSpec) -> ServerCatalog {
        ServerCatalog {
            tools: lists
                .tools
                .iter()
                .filter(|t| spec.exposes_tool(&t.name))
                .cloned()
                .collect(),
            prompts: lists.prompts.clone(),
            resources: lists.resources.clone(),
            templates: lists.templates.clone(),
            instructions: None,
        }
    }
}

/// A live connection, as callers see it.
#[derive(Debug)]
pub struct Upstream {
    pub server: String,
    pub handle: McpHandle,
    pub catalog: Arc<ServerCatalog>,
    /// Per-call timeout (the entry's `timeout`).
    pub timeout: Duration,
}

#[derive(Debug, Clone)]
enum Slot {
    Live(Arc<Upstream>),
    Restarting(Arc<ServerCatalog>),
    /// From the catalog cache, for the `configHash` it was stored under.
    Cached {
        catalog: Arc<ServerCatalog>,
        config_hash: String,
    },
}

impl Slot {
    fn catalog(&self) -> &Arc<ServerCatalog> {
        match self {
            Slot::Live(up) => &up.catalog,
            Slot::Restarting(catalog) | Slot::Cached { catalog, .. } => catalog,
        }
    }

    fn source(&self) -> CatalogSource {
        match self {
            Slot::Live(_) | Slot::Restarting(_) => CatalogSource::Live,
            Slot::Cached { .. } => CatalogSource::Cached,
        }
    }
}

/// Where an exposed tool or prompt name leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub server: String,
    /// The name the server knows it by.
    pub original: String,
}

/// What every client is offered: the union of the catalogs, exposed names
/// assigned, plus the `lsp` tool flag.
#[derive(Debug, Default)]
pub struct Union {
    pub tools: Vec<Tool>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
    tool_routes: HashMap<String, Route>,
    prompt_routes: HashMap<String, Route>,
    resource_owner: HashMap<String, String>,
    /// `(uriTemplate, server)`, in listing order.
    template_owner: Vec<(String, String)>,
    /// Resources hidden because an earlier server (by name) lists the same URI.
    pub conflicts: Vec<String>,
    /// `(server, instructions)` of the servers that gave some, by name.
    pub instructions: Vec<(String, String)>,
    /// Whether a language server is ready (the `lsp` tool is listed).
    pub lsp: bool,
    /// Change detection per list kind: tools, prompts, resources.
    pub fingerprints: [u64; 3],
    /// The search index over `tools`, built when first searched.
    index: OnceLock<ToolIndex>,
}

impl Union {
    pub fn tool(&self, exposed: &str) -> Option<&Route> {
        self.tool_routes.get(exposed)
    }

    pub fn prompt(&self, exposed: &str) -> Option<&Route> {
        self.prompt_routes.get(exposed)
    }

    /// The server that lists the resource `uri`, or whose template it fits
    /// (the first template, in listing order, whose literal prefix matches).
    pub fn resource_owner(&self, uri: &str) -> Option<&str> {
        if let Some(server) = self.resource_owner.get(uri) {
            return Some(server);
        }
        self.template_owner
            .iter()
            .filter(|(template, _)| {
                let prefix = template.split('{').next().unwrap_or_default();
                !prefix.is_empty() && uri.starts_with(prefix)
            })
            .max_by_key(|(template, _)| template.split('{').next().unwrap_or_default().len())
            .map(|(_, server)| server.as_str())
    }

    /// The server that offers the template `uri_template`.
    pub fn template_owner(&self, uri_template: &str) -> Option<&str> {
        self.template_owner
            .iter()
            .find(|(t, _)| t == uri_template)
            .map(|(_, s)| s.as_str())
    }

    /// Each listed tool with where it leads, in listing order.
    pub fn tool_routes(&self) -> impl Iterator<Item = (&Tool, &Route)> {
        self.tools
            .iter()
            .filter_map(|tool| Some((tool, self.tool_routes.get(tool.name.as_ref())?)))
    }

    /// The servers with a listed tool, by name.
    pub fn servers(&self) -> Vec<String> {
        let mut servers: Vec<String> = self
            .tool_routes
            .values()
            .map(|r| r.server.clone())
            .collect();
        servers.sort();
        servers.dedup();
        servers
    }

    /// The search index over [`Self::tools`] (a hit's index is a position
    /// in it), built once per union: the union is rebuilt on every change.
    pub fn index(&self) -> &ToolIndex {
        self.index.get_or_init(|| {
            // Indexed under the names their servers gave them: the server is
            // a field of its own.
            let originals: Vec<(String, Tool)> = self
                .tools
                .iter()
                .map(|tool| {
                    let route = &self.tool_routes[tool.name.as_ref()];
                    let mut original = tool.clone();
                    original.name = route.original.clone().into();
                    (route.server.clone(), original)
                })
                .collect();
            ToolIndex::build(
                self.tools
                    .iter()
                    .zip(&originals)
                    .map(|(exposed, (server, tool))| SearchEntry {
                        exposed: exposed.name.as_ref(),
                        server,
                        tool,
                    }),
            )
        })
    }

    /// Every exposed tool name (`lsp` included when listed).
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.name.as_ref())
    }

    /// The union of `slots`, named `server__tool` within `max_name_len`
    /// characters, or (`None`) under the servers' own names: the one-server
    /// view, whose servers' instructions go in its `initialize` answer and
    /// are not listed as resources.
    fn build(slots: &BTreeMap<String, Slot>, lsp: bool, max_name_len: Option<usize>) -> Union {
        let mut union = Union {
            lsp,
            ..Union::default()
        };
        let pairs: Vec<(&str, &Tool)> = slots
            .iter()
            .flat_map(|(s, slot)| slot.catalog().tools.iter().map(move |t| (s.as_str(), t)))
            .collect();
        let exposed = named(
            pairs.iter().map(|(s, t)| (*s, t.name.as_ref())),
            max_name_len,
        );
        for ((server, tool), name) in pairs.into_iter().zip(exposed) {
            if union.tool_routes.contains_key(&name) {
                continue; // a server listing one tool twice
            }
            let mut tool = tool.clone();
            union.tool_routes.insert(
                name.clone(),
                Route {
                    server: server.to_owned(),
                    original: tool.name.to_string(),
                },
            );
            tool.name = name.into();
            union.tools.push(tool);
        }
        let pairs: Vec<(&str, &Prompt)> = slots
            .iter()
            .flat_map(|(s, slot)| slot.catalog().prompts.iter().map(move |p| (s.as_str(), p)))
            .collect();
        let exposed = named(
            pairs.iter().map(|(s, p)| (*s, p.name.as_str())),
            max_name_len,
        );
        for ((server, prompt), name) in pairs.into_iter().zip(exposed) {
            if union.prompt_routes.contains_key(&name) {
                continue;
            }
            let mut prompt = prompt.clone();
            union.prompt_routes.insert(
                name.clone(),
                Route {
                    server: server.to_owned(),
                    original: prompt.name.clone(),
                },
            );
            prompt.name = name;
            union.prompts.push(prompt);
        }
        for (server, slot) in slots.iter().filter(|_| max_name_len.is_some()) {
            if let Some(text) = &slot.catalog().instructions {
                union.instructions.push((server.clone(), text.clone()));
                // Listed so that a client can read the whole text.
                union.resources.push(
                    Resource::new(
                        instructions::uri(server),
                        format!("{server} instructions"),
                    )
                    .with_description(format!(
                        "What MCP server {server} tells its clients, whole (Steward's own instructions carry a short form)"
                    ))
                    .with_mime_type("text/plain"),
                );
            }
        }
        for (server, slot) in slots {
            for resource in &slot.catalog().resources {
                match union.resource_owner.get(&resource.uri) {
                    Some(owner) => union.conflicts.push(format!(
                        "resource {} of server {server} is hidden: server {owner} lists the same URI",
                        resource.uri
                    )),
                    None => {
                        union
                            .resource_owner
                            .insert(resource.uri.clone(), server.clone());
                        union.resources.push(resource.clone());
                    }
                }
            }
            for template in &slot.catalog().templates {
                if let Some(owner) = union.template_owner(&template.uri_template) {
                    union.conflicts.push(format!(
                        "resource template {} of server {server} is hidden: server {owner} lists the same template",
                        template.uri_template
                    ));
                    continue;
                }
                union
                    .template_owner
                    .push((template.uri_template.clone(), server.clone()));
                union.templates.push(template.clone());
            }
        }
        union.fingerprints = [
            fingerprint(&(&union.tools, union.lsp)),
            fingerprint(&union.prompts),
            fingerprint(&(&union.resources, &union.templates)),
        ];
        union
    }
}

/// The exposed names of `(server, name)` pairs: `server__name` within
/// `max_name_len` characters, or (`None`) the names themselves.
fn named<'a>(
    pairs: impl Iterator<Item = (&'a str, &'a str)>,
    max_name_len: Option<usize>,
) -> Vec<String> {
    match max_name_len {
        Some(max) => names::assign(pairs, max),
        None => pairs.map(|(_, name)| name.to_owned()).collect(),
    }
}

fn fingerprint<T: Serialize>(value: &T) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_vec(value)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

/// Call counters of one server (kept across its restarts).
#[derive(Debug)]
pub struct Counters {
    total: AtomicU64,
    failed: AtomicU64,
    in_flight: AtomicU64,
    /// Every server's counters share one: moves on every change of any.
    changes: Arc<AtomicU64>,
}

impl Counters {
    /// Count a call; the guard counts it finished (failed unless told).
    pub fn begin(self: &Arc<Self>) -> CallGuard {
        self.total.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.changes.fetch_add(1, Ordering::Release);
        CallGuard {
            counters: self.clone(),
            failed: true,
        }
    }

    pub fn snapshot(&self) -> CallCounts {
        CallCounts {
            total: self.total.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
        }
    }
}

/// One counted call.
#[derive(Debug)]
pub struct CallGuard {
    counters: Arc<Counters>,
    failed: bool,
}

impl CallGuard {
    pub fn succeeded(mut self) {
        self.failed = false;
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.counters.in_flight.fetch_sub(1, Ordering::Relaxed);
        if self.failed {
            self.counters.failed.fetch_add(1, Ordering::Relaxed);
        }
        self.counters.changes.fetch_add(1, Ordering::Release);
    }
}

#[derive(Debug, Default)]
struct Inner {
    slots: BTreeMap<String, Slot>,
    /// Some language server is Ready (a copy of what [`crate::gateway::lsp::LspService`]
    /// routes to, kept here because it is part of the union).
    lsp: bool,
    /// The `lsp` tool is listed before any language server is Ready: the
    /// catalog cache listed every MCP server at start, and a language server
    /// is starting (calls of the `lsp` tool wait for it).
    lsp_expected: bool,
    counters: BTreeMap<String, Arc<Counters>>,
    /// The union with names of at most [`names::MAX_LEN`] characters.
    union: Arc<Union>,
    /// The same union for clients that asked for shorter names, made when
    /// first asked for and dropped on every change.
    shorter: BTreeMap<usize, Arc<Union>>,
    /// One server's catalog under its own names (its one-server view),
    /// made when first asked for and dropped on every change.
    single: BTreeMap<String, Arc<Union>>,
}

impl Inner {
    fn rebuild(&mut self) {
        self.union = Arc::new(Union::build(
            &self.slots,
            self.lsp || self.lsp_expected,
            Some(names::MAX_LEN),
        ));
        self.shorter.clear();
        self.single.clear();
    }

    fn union_for(&mut self, max_name_len: usize) -> Arc<Union> {
        if max_name_len == names::MAX_LEN {
            return self.union.clone();
        }
        let (slots, lsp) = (&self.slots, self.lsp || self.lsp_expected);
        self.shorter
            .entry(max_name_len)
            .or_insert_with(|| Arc::new(Union::build(slots, lsp, Some(max_name_len))))
            .clone()
    }

    fn union_of(&mut self, server: &str) -> Arc<Union> {
        let slots = &self.slots;
        self.single
            .entry(server.to_owned())
            .or_insert_with(|| {
                let one: BTreeMap<String, Slot> = slots
                    .get(server)
                    .map(|slot| (server.to_owned(), slot.clone()))
                    .into_iter()
                    .collect();
                Arc::new(Union::build(&one, false, None))
            })
            .clone()
    }
}

/// See the module doc.
#[derive(Debug)]
pub struct Registry {
    inner: Mutex<Inner>,
    version: watch::Sender<u64>,
    /// Moves whenever a call starts or ends (see [`Self::calls_version`]).
    calls_changed: Arc<AtomicU64>,
}

impl Default for Registry {
    fn default() -> Self {
        let mut inner = Inner::default();
        // The empty union's own fingerprints, not zeros: the first change
        // is compared with what an agent connecting now would be offered.
        inner.rebuild();
        Registry {
            inner: Mutex::new(inner),
            version: watch::Sender::new(0),
            calls_changed: Arc::default(),
        }
    }
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        crate::support::sync::lock(&self.inner)
    }

    fn bump(&self) {
        self.version.send_modify(|v| *v += 1);
    }

    /// A receiver that sees every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// `handle` is the live connection of `server` under `spec`, offering
    /// `lists`: callers may use it. Publishing the same connection and catalog again changes
    /// nothing.
    pub fn publish(
        &self,
        server: &str,
        handle: &McpHandle,
        lists: &McpLists,
        spec: &McpServerSpec,
    ) {
        let catalog = ServerCatalog {
            instructions: handle.instructions(),
            ..ServerCatalog::filtered(lists, spec)
        };
        let handle = handle.clone();
        let timeout = spec.call_timeout();
        let mut inner = self.lock();
        if let Some(Slot::Live(up)) = inner.slots.get(server)
            && Arc::ptr_eq(up.handle.relay(), handle.relay())
            && *up.catalog == catalog
            && up.timeout == timeout
        {
            return;
        }
        let catalog_changed = inner
            .slots
            .get(server)
            .is_none_or(|slot| **slot.catalog() != catalog);
        inner.slots.insert(
            server.to_owned(),
            Slot::Live(Arc::new(Upstream {
                server: server.to_owned(),
                handle,
                catalog: Arc::new(catalog),
                timeout,
            })),
        );
        if catalog_changed {
            inner.rebuild();
        }
        drop(inner);
        self.bump();
    }

    /// `server`, which has no slot, is starting under `config_hash`, and
    /// `catalog` is what the catalog cache holds for it: listed until it is
    /// published (or withdrawn); calls wait for it meanwhile. A server that
    /// already has a slot keeps it.
    pub fn offer_cached(&self, server: &str, catalog: ServerCatalog, config_hash: &str) {
        let mut inner = self.lock();
        if inner.slots.contains_key(server) {
            return;
        }
        inner.slots.insert(
            server.to_owned(),
            Slot::Cached {
                catalog: Arc::new(catalog),
                config_hash: config_hash.to_owned(),
            },
        );
        inner.rebuild();
        drop(inner);
        self.bump();
    }

    /// `server` is idle under `config_hash`: `catalog` (from the catalog
    /// cache) is listed in place of whatever it had, live or not; calls wait
    /// for its next [`publish`](Self::publish).
    pub fn idle(&self, server: &str, catalog: ServerCatalog, config_hash: &str) {
        let mut inner = self.lock();
        let changed = match inner.slots.get(server) {
            Some(Slot::Cached {
                catalog: c,
                config_hash: h,
            }) if **c == catalog && h == config_hash => return,
            Some(slot) => **slot.catalog() != catalog,
            None => true,
        };
        inner.slots.insert(
            server.to_owned(),
            Slot::Cached {
                catalog: Arc::new(catalog),
                config_hash: config_hash.to_owned(),
            },
        );
        if changed {
            inner.rebuild();
        }
        drop(inner);
        self.bump();
    }

    /// The servers listed from the cache now, with the `configHash` of
    /// their cached catalog.
    pub fn cached(&self) -> Vec<(String, String)> {
        self.lock()
            .slots
            .iter()
            .filter_map(|(name, slot)| match slot {
                Slot::Cached { config_hash, .. } => Some((name.clone(), config_hash.clone())),
                _ => None,
            })
            .collect()
    }

    /// Where each listed server's catalog comes from.
    pub fn sources(&self) -> BTreeMap<String, CatalogSource> {
        self.lock()
            .slots
            .iter()
            .map(|(name, slot)| (name.clone(), slot.source()))
            .collect()
    }

    /// `server` is being restarted for a new configuration: new calls wait
    /// for the next [`publish`](Self::publish); its catalog stays listed.
    pub fn restarting(&self, server: &str) {
        let mut inner = self.lock();
        let Some(Slot::Live(up)) = inner.slots.get(server) else {
            return;
        };
        let catalog = up.catalog.clone();
        inner
            .slots
            .insert(server.to_owned(), Slot::Restarting(catalog));
        drop(inner);
        self.bump();
    }

    /// `server`'s connection is being stopped (or its start abandoned). A
    /// server restarting for a new configuration keeps its catalog listed
    /// (see [`Self::restarting`]); a cached one goes.
    pub fn stopping(&self, server: &str) {
        if matches!(
            self.lock().slots.get(server),
            Some(Slot::Live(_) | Slot::Cached { .. })
        ) {
            self.withdraw(server);
        }
    }

    /// Withdraw `server` if its catalog is still the cached one (not once it
    /// is live).
    pub fn withdraw_cached(&self, server: &str) {
        let mut inner = self.lock();
        if !matches!(inner.slots.get(server), Some(Slot::Cached { .. })) {
            return;
        }
        inner.slots.remove(server);
        inner.rebuild();
        drop(inner);
        self.bump();
    }

    /// `server` is not live any more (stopped, crashed, blocked, removed, or
    /// its restart failed).
    pub fn withdraw(&self, server: &str) {
        let mut inner = self.lock();
        if inner.slots.remove(server).is_none() {
            return;
        }
        inner.rebuild();
        drop(inner);
        self.bump();
    }

    /// `server` left the configuration: also drop its counters.
    pub fn forget(&self, server: &str) {
        self.withdraw(server);
        self.lock().counters.remove(server);
    }

    /// Whether some language server is ready: the `lsp` tool is listed
    /// while one is. Only the LSP service, which owns the ready language
    /// servers, says so.
    pub(crate) fn set_lsp_available(&self, available: bool) {
        let mut inner = self.lock();
        if inner.lsp != available {
            inner.lsp = available;
            inner.rebuild();
            drop(inner);
            self.bump();
        }
    }

    /// Whether the `lsp` tool is listed while no language server is Ready
    /// yet (see `Inner::lsp_expected`).
    pub(crate) fn set_lsp_expected(&self, expected: bool) {
        let mut inner = self.lock();
        if inner.lsp_expected != expected {
            inner.lsp_expected = expected;
            inner.rebuild();
            drop(inner);
            self.bump();
        }
    }

    pub(crate) fn lsp_expected(&self) -> bool {
        self.lock().lsp_expected
    }

    /// What clients are offered now.
    pub fn union(&self) -> Arc<Union> {
        self.lock().union.clone()
    }

    /// What clients whose names are at most `max_name_len` characters are
    /// offered now.
    pub fn union_for(&self, max_name_len: usize) -> Arc<Union> {
        self.lock().union_for(max_name_len)
    }

    /// What the one-server view of `server` offers now: its catalog under
    /// its own names (empty while it is not listed).
    pub fn union_of(&self, server: &str) -> Arc<Union> {
        self.lock().union_of(server)
    }

    /// Whether `server`'s catalog is listed (live, restarting with its last
    /// catalog, or cached).
    pub fn listed(&self, server: &str) -> bool {
        self.lock().slots.contains_key(server)
    }

    /// The live connection of `server`, if any.
    pub fn live(&self, server: &str) -> Option<Arc<Upstream>> {
        match self.lock().slots.get(server) {
            Some(Slot::Live(up)) => Some(up.clone()),
            _ => None,
        }
    }

    /// Every live connection.
    pub fn all_live(&self) -> Vec<Arc<Upstream>> {
        self.lock()
            .slots
            .values()
            .filter_map(|slot| match slot {
                Slot::Live(up) => Some(up.clone()),
                Slot::Restarting(_) | Slot::Cached { .. } => None,
            })
            .collect()
    }

    /// The call counters of `server`.
    pub fn counters(&self, server: &str) -> Arc<Counters> {
        self.lock()
            .counters
            .entry(server.to_owned())
            .or_insert_with(|| {
                Arc::new(Counters {
                    total: AtomicU64::new(0),
                    failed: AtomicU64::new(0),
                    in_flight: AtomicU64::new(0),
                    changes: self.calls_changed.clone(),
                })
            })
            .clone()
    }

    /// The version of the catalogs and slots: moves on every change.
    pub fn version(&self) -> u64 {
        *self.version.borrow()
    }

    /// The version of the call counters: the same value means the same
    /// counts ([`Self::calls`]).
    pub fn calls_version(&self) -> u64 {
        self.calls_changed.load(Ordering::Acquire)
    }

    /// Call counts of every server that was called.
    pub fn calls(&self) -> BTreeMap<String, CallCounts> {
        self.lock()
            .counters
            .iter()
            .map(|(name, c)| (name.clone(), c.snapshot()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_registry_has_the_fingerprints_of_an_empty_union() {
        let registry = Registry::default();
        let empty = Union::build(&BTreeMap::new(), false, Some(names::MAX_LEN));
        assert_eq!(registry.union().fingerprints, empty.fingerprints);
        assert_ne!(empty.fingerprints, [0, 0, 0]);
    }

    fn catalog(tools: &[&str]) -> ServerCatalog {
        ServerCatalog {
            tools: tools
                .iter()
                .map(|t| {
                    serde_json::from_value(serde_json::json!({"name": t, "inputSchema": {}}))
                        .unwrap()
                })
                .collect(),
            ..ServerCatalog::default()
        }
    }

    #[test]
    fn a_cached_catalog_is_listed_not_callable_and_goes_when_its_start_stops() {
        let registry = Registry::default();
        let empty = registry.union().fingerprints;
        registry.offer_cached("s", catalog(&["echo"]), "h");
        let union = registry.union();
        assert_eq!(union.tool_names().collect::<Vec<_>>(), ["s__echo"]);
        assert!(registry.listed("s"));
        assert!(registry.live("s").is_none());
        assert!(registry.all_live().is_empty());
        assert_eq!(registry.cached(), [("s".to_owned(), "h".to_owned())]);
        assert_eq!(registry.sources()["s"], CatalogSource::Cached);
        // Offered again (a second start): the first stays.
        registry.offer_cached("s", catalog(&["other"]), "h2");
        assert_eq!(registry.cached()[0].1, "h");
        // A start abandoned (blocked, config edit before Ready) withdraws it;
        // a restarting slot (not cached) would stay.
        registry.stopping("s");
        assert!(!registry.listed("s"));
        assert_eq!(registry.union().fingerprints, empty);
        registry.offer_cached("s", catalog(&["echo"]), "h");
        registry.withdraw_cached("s");
        assert!(registry.union().tools.is_empty());
    }

    #[test]
    fn the_one_server_view_lists_one_server_under_its_own_names() {
        let registry = Registry::default();
        registry.offer_cached("s", catalog(&["echo", "two words"]), "h");
        registry.offer_cached("t", catalog(&["echo"]), "h");
        let one = registry.union_of("s");
        assert_eq!(one.tool_names().collect::<Vec<_>>(), ["echo", "two words"]);
        assert_eq!(one.tool("echo").unwrap().server, "s");
        assert_eq!(one.tool("echo").unwrap().original, "echo");
        assert!(!one.lsp);
        assert!(registry.union_of("nobody").tools.is_empty());
        // Dropped with every change.
        registry.withdraw_cached("s");
        assert!(registry.union_of("s").tools.is_empty());
    }

    #[test]
    fn the_lsp_tool_is_listed_while_a_language_server_is_expected_or_ready() {
        let registry = Registry::default();
        registry.set_lsp_expected(true);
        assert!(registry.union().lsp);
        registry.set_lsp_available(true);
        registry.set_lsp_expected(false);
        assert!(registry.union().lsp);
        registry.set_lsp_available(false);
        assert!(!registry.union().lsp);
    }
}

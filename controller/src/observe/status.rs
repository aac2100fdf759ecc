//! The status store: the observed state of every server and of the
//! controller, and the one place `WorkspaceStatus` documents are assembled.
//!
//! Writers (reconcile, the reload tracker) update entries; readers (the
//! control socket, `status --watch`) take a consistent document and wait for
//! the next change on a version counter. Conditions follow the Kubernetes
//! convention: `lastTransitionTime` moves only when `status` changes.
//!
//! Beside the statuses it holds the rest of what is observed: the event log
//! ([`crate::observe::events`]), fed here from every change of a server's phase or
//! reason, and the servers' stderr logs ([`crate::observe::logs`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use steward_schema::admission;
use steward_schema::resource::{
    API_VERSION, Condition, ConditionStatus, ControllerStatus, Item, LspServer, LspServerSpec,
    McpServer, McpServerSpec, Metadata, Phase, Reason, ReloadSummary, RemovedRef, ResourceKind,
    ServerStatus, WorkspaceStatus,
};
use tokio::sync::watch;

use crate::desired::snapshot::{Key, Snapshot};
use crate::observe::events::{self, EventLog, ObjectRef};
use crate::observe::logs::LogStore;

use crate::observe::clock::now_rfc3339;

/// Set condition `type_` in `conditions`; the transition time changes only
/// when the status does.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: Option<&str>,
    message: Option<&str>,
    now: &str,
) {
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now.to_owned();
            }
            c.status = status;
            c.reason = reason.map(str::to_owned);
            c.message = message.map(str::to_owned);
        }
        None => conditions.push(Condition {
            type_: type_.to_owned(),
            status,
            reason: reason.map(str::to_owned),
            message: message.map(str::to_owned),
            last_transition_time: now.to_owned(),
        }),
    }
}

/// Facts about the controller process itself.
#[derive(Debug, Clone, Default)]
pub struct ControllerFacts {
    pub pid: Option<u32>,
    pub started_at: Option<String>,
    /// The name the workspace's own events are recorded under (its directory name).
    pub workspace_name: String,
}

#[derive(Debug, Default)]
struct Inner {
    servers: BTreeMap<Key, ServerStatus>,
    last_reload: Option<ReloadSummary>,
    conditions: Vec<Condition>,
    removed: BTreeSet<Key>,
}

/// A spec as shown without secrets, and the spec it was made from (held so
/// that its address, the memo key, stays its own).
#[derive(Debug)]
enum Shown {
    Mcp {
        _from: Arc<McpServerSpec>,
        shown: Arc<McpServerSpec>,
    },
    Lsp {
        _from: Arc<LspServerSpec>,
        shown: Arc<LspServerSpec>,
    },
}

/// Observed state, shared by the reconcilers and the readers.
#[derive(Debug)]
pub struct StatusStore {
    inner: Mutex<Inner>,
    version: watch::Sender<u64>,
    facts: ControllerFacts,
    events: EventLog,
    logs: Arc<LogStore>,
    /// Redacted specs of the last document shown, by the address of the
    /// spec they were made from: a snapshot shares unchanged specs, so an
    /// unchanged spec is redacted once, not per document.
    shown: Mutex<HashMap<usize, Shown>>,
}

impl StatusStore {
    pub fn new(facts: ControllerFacts) -> Self {
        StatusStore {
            inner: Mutex::new(Inner::default()),
            version: watch::Sender::new(0),
            facts,
            events: EventLog::default(),
            logs: Arc::default(),
            shown: Mutex::default(),
        }
    }

    /// The event log (server events are recorded by [`Self::update`]).
    pub fn events(&self) -> &EventLog {
        &self.events
    }

    /// The servers' stderr logs.
    pub fn logs(&self) -> &Arc<LogStore> {
        &self.logs
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn bump(&self) {
        self.version.send_modify(|v| *v += 1);
    }

    /// A receiver that sees a new value after every change.
    /// Moves on every change of what [`Self::workspace_status`] shows.
    pub fn version(&self) -> u64 {
        *self.version.borrow()
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Every server whose status is in `phase`.
    pub fn keys_in_phase(&self, phase: Phase) -> Vec<Key> {
        self.lock()
            .servers
            .iter()
            .filter(|(_, s)| s.phase == phase)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The status of `key`, if it was ever written.
    pub fn get(&self, key: &Key) -> Option<ServerStatus> {
        self.lock().servers.get(key).cloned()
    }

    /// Update the status of `key`, starting from `initial` if it has none.
    pub fn update(
        &self,
        key: &Key,
        initial: impl FnOnce() -> ServerStatus,
        f: impl FnOnce(&mut ServerStatus),
    ) {
        let (changed, event) = {
            let mut inner = self.lock();
            let removed = inner.removed.remove(key);
            let existed = inner.servers.contains_key(key);
            let entry = inner.servers.entry(key.clone()).or_insert_with(initial);
            let before = entry.clone();
            f(entry);
            // The sandbox is a fact of the running process: none without one.
            if entry.pid.is_none() {
                entry.sandbox = None;
            }
            let changed = removed || *entry != before;
            let event = changed
                .then(|| events::transition(existed.then_some(&before), entry))
                .flatten();
            (changed, event)
        };
        if let Some(event) = event {
            self.events
                .record(ObjectRef::server(key), event, &now_rfc3339());
        }
        // Readers (watch streams) only wake for real changes: a resync that
        // confirms a Ready server writes the same status and costs nothing.
        if changed {
            self.bump();
        }
    }

    /// Forget `key` (it left the configuration); remember it as removed.
    pub fn remove(&self, key: &Key) {
        let known = {
            let mut inner = self.lock();
            let known = inner.servers.remove(key).is_some();
            inner.removed.insert(key.clone());
            known
        };
        if known {
            self.events
                .record(ObjectRef::server(key), events::removed(), &now_rfc3339());
        }
        self.logs.forget(key);
        self.bump();
    }

    /// Names removed from the configuration during this controller's life:
    /// forgotten, or not in `snap` and still stopping (a removed server is
    /// forgotten only once its process is gone).
    pub fn removed_names(&self, kind: ResourceKind, snap: &Snapshot) -> BTreeSet<String> {
        let inner = self.lock();
        let stopping = inner.servers.keys().filter(|k| !snap.contains(k));
        inner
            .removed
            .iter()
            .chain(stopping)
            .filter(|r| r.kind == kind)
            .map(|r| r.name.clone())
            .collect()
    }

    /// Whether a reload (the cold start first) has finished.
    pub fn reloaded_once(&self) -> bool {
        self.lock().last_reload.is_some()
    }

    pub fn set_last_reload(&self, summary: ReloadSummary) {
        self.workspace_event(events::reloaded(&summary));
        self.lock().last_reload = Some(summary);
        self.bump();
    }

    /// Record an event about the workspace's controller itself.
    pub fn workspace_event(&self, event: events::NewEvent) {
        self.events.record(
            ObjectRef::workspace(&self.facts.workspace_name),
            event,
            &now_rfc3339(),
        );
    }

    /// Set a controller-level condition.
    pub fn set_controller_condition(
        &self,
        type_: &str,
        status: ConditionStatus,
        reason: Option<&str>,
        message: Option<&str>,
    ) {
        let now = now_rfc3339();
        set_condition(
            &mut self.lock().conditions,
            type_,
            status,
            reason,
            message,
            &now,
        );
        self.bump();
    }

    /// The status of controller condition `type_`, if it was ever set.
    pub fn controller_condition(&self, type_: &str) -> Option<ConditionStatus> {
        self.lock()
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.status)
    }

    /// Notify readers that something outside the store changed (a snapshot).
    pub fn touch(&self) {
        self.bump();
    }

    /// The phase and reason of every server [`Self::workspace_status`]
    /// lists for `snap`, without building the document (for metrics).
    pub fn phases(&self, snap: &Snapshot) -> Vec<(Key, Phase, Option<Reason>)> {
        let inner = self.lock();
        let of = |key: Key| match inner.servers.get(&key) {
            Some(s) => (key, s.phase, s.reason),
            None => match snap.blocked(&key) {
                Some(b) => (key, Phase::Blocked, Some(b.reason)),
                None => (key, Phase::Pending, None),
            },
        };
        let invalid = |key: Key| (key, Phase::Failed, Some(Reason::InvalidSpec));
        let desired = &snap.desired;
        let mut all: Vec<_> = desired.mcp.keys().map(|n| of(Key::mcp(n))).collect();
        all.extend(desired.invalid_mcp.keys().map(|n| invalid(Key::mcp(n))));
        if desired.lsp_enabled {
            all.extend(desired.lsp.keys().map(|n| of(Key::lsp(n))));
            all.extend(desired.invalid_lsp.keys().map(|n| invalid(Key::lsp(n))));
        }
        all
    }

    /// [`Self::workspace_status`] as shown to a client: specs without
    /// secrets ([`steward_schema::redact`]) unless `show_secrets`.
    pub fn workspace_status_shown(&self, snap: &Snapshot, show_secrets: bool) -> WorkspaceStatus {
        let mut doc = self.workspace_status(snap);
        if show_secrets {
            return doc;
        }
        let mut memo = self.shown.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = HashMap::with_capacity(doc.items.len());
        for item in &mut doc.items {
            // Keyed by the spec's address: the memo holds the spec, so the
            // address cannot be reused while the entry exists.
            let (addr, shown) = match item {
                Item::McpServer(s) => {
                    let addr = Arc::as_ptr(&s.spec) as usize;
                    let shown = match memo.remove(&addr) {
                        Some(Shown::Mcp { shown, .. }) => shown,
                        _ => Arc::new(s.spec.redacted()),
                    };
                    let from = std::mem::replace(&mut s.spec, shown.clone());
                    (addr, Shown::Mcp { _from: from, shown })
                }
                Item::LspServer(s) => {
                    let addr = Arc::as_ptr(&s.spec) as usize;
                    let shown = match memo.remove(&addr) {
                        Some(Shown::Lsp { shown, .. }) => shown,
                        _ => Arc::new(s.spec.redacted()),
                    };
                    let from = std::mem::replace(&mut s.spec, shown.clone());
                    (addr, Shown::Lsp { _from: from, shown })
                }
            };
            next.insert(addr, shown);
        }
        *memo = next;
        doc
    }

    /// The whole document for `snap`, with the observed status of each
    /// desired server (or its admission status before any reconcile).
    pub fn workspace_status(&self, snap: &Snapshot) -> WorkspaceStatus {
        let now = now_rfc3339();
        let inner = self.lock();
        // Observed status, or admission alone before the first reconcile.
        let status_of = |key: &Key| {
            inner
                .servers
                .get(key)
                .cloned()
                .unwrap_or_else(|| admission::admission_status(snap.blocked(key), &now))
        };
        let metadata = |key: &Key, source| Metadata {
            name: key.name.clone(),
            source,
            generation: snap.generation(key),
        };
        // By kind, then name; entries that produced no spec have an
        // `InvalidSpec` row among the others.
        // Removed from the desired state: already forgotten, or still
        // stopping (shown as such, with the pid, until its process is gone).
        let removed: BTreeSet<RemovedRef> = inner
            .removed
            .iter()
            .map(|k| RemovedRef {
                kind: k.kind,
                name: k.name.clone(),
                phase: None,
                pid: None,
            })
            .chain(
                inner
                    .servers
                    .iter()
                    .filter(|(k, _)| !snap.contains(k))
                    .map(|(k, s)| RemovedRef {
                        kind: k.kind,
                        name: k.name.clone(),
                        phase: Some(Phase::Stopping),
                        pid: s.pid,
                    }),
            )
            .collect();
        let mut items: BTreeMap<Key, Item> = BTreeMap::new();
        for (name, d) in &snap.desired.mcp {
            let key = Key::mcp(name);
            let item = Item::McpServer(McpServer {
                api_version: API_VERSION.to_owned(),
                metadata: metadata(&key, d.source),
                spec: d.spec.clone(),
                status: status_of(&key),
            });
            items.insert(key, item);
        }
        for (name, entry) in &snap.desired.invalid_mcp {
            items.insert(Key::mcp(name), admission::invalid_item(name, entry, &now));
        }
        if snap.desired.lsp_enabled {
            for (name, d) in &snap.desired.lsp {
                let key = Key::lsp(name);
                let item = Item::LspServer(LspServer {
                    api_version: API_VERSION.to_owned(),
                    metadata: metadata(&key, d.source),
                    spec: d.spec.clone(),
                    status: status_of(&key),
                });
                items.insert(key, item);
            }
            for (name, entry) in &snap.desired.invalid_lsp {
                items.insert(Key::lsp(name), admission::invalid_item(name, entry, &now));
            }
        }
        WorkspaceStatus {
            api_version: API_VERSION.to_owned(),
            kind: "WorkspaceStatus".to_owned(),
            workspace: snap.desired.workspace.to_string_lossy().into_owned(),
            controller: ControllerStatus {
                running: true,
                pid: self.facts.pid,
                trusted: snap.desired.policy.trusted,
                lsp_enabled: snap.desired.lsp_enabled,
                started_at: self.facts.started_at.clone(),
                last_reload: inner.last_reload.clone(),
                conditions: inner.conditions.clone(),
                gateway: None,
            },
            sources: snap.source_statuses(),
            removed: removed
                .into_iter()
                .filter(|r| {
                    !items.contains_key(&Key {
                        kind: r.kind,
                        name: r.name.clone(),
                    })
                })
                .collect(),
            items: items.into_values().collect(),
        }
    }
}

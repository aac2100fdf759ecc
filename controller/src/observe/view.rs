//! The `WorkspaceStatus` view: the status store's document over the current
//! snapshot (secrets hidden unless asked), plus what readers further down
//! the flow add to it (the agent endpoint's clients and call counters, as a
//! [`Decoration`]). `steward status` is answered from the last document's
//! JSON while nothing it was built from has changed, and when something
//! has, only the items that differ are serialized again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::value::RawValue;
use steward_schema::resource::{ControllerStatus, Item, RemovedRef, SourceStatus, WorkspaceStatus};

use crate::desired::snapshot::{DesiredStore, Snapshot};
use crate::observe::status::StatusStore;
use crate::support::sync::lock;

/// Facts a reader downstream adds to the document.
pub trait Decoration: Send + Sync {
    /// Changes whenever what [`Decoration::decorate`] adds changes.
    fn version(&self) -> (u64, u64);
    /// Adds its facts to `doc`.
    fn decorate(&self, doc: &mut WorkspaceStatus);
}

/// The status document and its serialized cache.
pub struct StatusView {
    store: Arc<DesiredStore>,
    status: Arc<StatusStore>,
    decoration: Arc<dyn Decoration>,
    /// The last answer, serialized: while nothing changes a request costs a
    /// copy, not a document (at 500 servers building and serializing the
    /// ~0.8 MB document took ~5 ms of controller CPU per request).
    cache: Mutex<Option<Cached>>,
    /// Each item of the last document built (by secrets shown, kind and
    /// name) and its JSON: during a reload of one server among hundreds,
    /// every status request would otherwise serialize all of them again
    /// (~1 MB at 500 servers), a CPU the reload itself needs.
    items: Mutex<HashMap<ItemKey, (Item, Arc<RawValue>)>>,
}

/// Secrets shown, MCP (not LSP), name.
type ItemKey = (bool, bool, String);

struct Cached {
    /// Status store version, decoration version, secrets shown.
    versions: (u64, (u64, u64), bool),
    /// Held so that its address is not reused while it is compared.
    snapshot: Arc<Snapshot>,
    json: Arc<RawValue>,
}

impl StatusView {
    pub fn new(
        store: Arc<DesiredStore>,
        status: Arc<StatusStore>,
        decoration: Arc<dyn Decoration>,
    ) -> Self {
        StatusView {
            store,
            status,
            decoration,
            cache: Mutex::new(None),
            items: Mutex::default(),
        }
    }

    /// The status store the document is built from (its version moves on
    /// every change a `--watch` must see).
    pub fn status(&self) -> &Arc<StatusStore> {
        &self.status
    }

    /// The document now, serialized (from the cache when nothing changed).
    pub fn json(&self, show_secrets: bool) -> Result<Arc<RawValue>, serde_json::Error> {
        // Versions first: a change made while the document is built moves
        // them again, so the next request rebuilds.
        let versions = (
            self.status.version(),
            self.decoration.version(),
            show_secrets,
        );
        let snapshot = self.store.snapshot();
        let mut cached = lock(&self.cache);
        if let Some(c) = cached.as_ref()
            && c.versions == versions
            && Arc::ptr_eq(&c.snapshot, &snapshot)
        {
            return Ok(c.json.clone());
        }
        let doc = self.build(&snapshot, show_secrets);
        let json: Arc<RawValue> = self.serialize(doc, show_secrets)?.into();
        *cached = Some(Cached {
            versions,
            snapshot,
            json: json.clone(),
        });
        Ok(json)
    }

    /// `doc` as `serde_json` writes it (see [`serialize`]).
    fn serialize(
        &self,
        doc: WorkspaceStatus,
        show_secrets: bool,
    ) -> Result<Box<RawValue>, serde_json::Error> {
        serialize(&mut lock(&self.items), doc, show_secrets)
    }

    fn build(&self, snapshot: &Snapshot, show_secrets: bool) -> WorkspaceStatus {
        let mut doc = self.status.workspace_status_shown(snapshot, show_secrets);
        self.decoration.decorate(&mut doc);
        doc
    }
}

/// `doc` as `serde_json` writes it, each item taken from `memo` (the
/// last document's) when it is equal to the item then; `memo` becomes
/// this document's.
fn serialize(
    memo: &mut HashMap<ItemKey, (Item, Arc<RawValue>)>,
    doc: WorkspaceStatus,
    show_secrets: bool,
) -> Result<Box<RawValue>, serde_json::Error> {
    let mut next = HashMap::with_capacity(doc.items.len());
    let mut items = Vec::with_capacity(doc.items.len());
    for item in doc.items {
        let key = (
            show_secrets,
            matches!(item, Item::McpServer(_)),
            item.name().to_owned(),
        );
        let json = match memo.remove(&key) {
            Some((before, json)) if before == item => json,
            _ => serde_json::value::to_raw_value(&item)?.into(),
        };
        items.push(json.clone());
        next.insert(key, (item, json));
    }
    // The other view (secrets shown or not) keeps its items.
    next.extend(
        memo.drain()
            .filter(|((shown, ..), _)| *shown != show_secrets),
    );
    *memo = next;
    serde_json::value::to_raw_value(&Assembled {
        api_version: &doc.api_version,
        kind: &doc.kind,
        workspace: &doc.workspace,
        controller: &doc.controller,
        sources: &doc.sources,
        items: items.iter().map(|j| &**j).collect(),
        removed: &doc.removed,
    })
}

/// [`WorkspaceStatus`] with its items already serialized: written exactly
/// as the document would be (a test holds the two together).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Assembled<'a> {
    api_version: &'a str,
    kind: &'a str,
    workspace: &'a str,
    controller: &'a ControllerStatus,
    sources: &'a [SourceStatus],
    items: Vec<&'a RawValue>,
    removed: &'a [RemovedRef],
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(restarts: u64) -> WorkspaceStatus {
        let item = |name: &str, restarts: u64| {
            json!({
                "kind": "McpServer", "apiVersion": "steward.dev/v1alpha1",
                "metadata": {"name": name, "source": "ProjectMcpJson", "generation": 2},
                "spec": {"transport": "stdio", "scope": "workspace", "command": "srv",
                         "env": {"A": "{\"q\": \"é\u{1}\"}"},
                         "configHash": "c1", "approvalHash": "a1"},
                "status": {"phase": "Ready", "pid": 9, "restarts": restarts,
                           "tools": ["t"], "conditions": [{"type": "Ready", "status": "True",
                           "reason": "Ready", "lastTransitionTime": "2026-12-07T00:00:00Z"}]}
            })
        };
        serde_json::from_value(json!({
            "apiVersion": "steward.dev/v1alpha1", "kind": "WorkspaceStatus", "workspace": "/w",
            "controller": {"running": true, "pid": 7, "trusted": true, "lspEnabled": false},
            "sources": [],
            "items": [item("a", 0), item("b", restarts),
                      {"kind": "LspServer", "apiVersion": "steward.dev/v1alpha1",
                       "metadata": {"name": "a", "source": "LspJson", "generation": 1},
                       "spec": {"command": "clangd", "scope": "workspace", "languages": ["c"],
                                "transport": "stdio", "args": [], "env": {},
                                "extensionToLanguage": {".c": "c"}, "workspaceFolder": "/w",
                                "rootUri": "file:///w", "startupTimeout": 1, "shutdownTimeout": 1,
                                "restartOnCrash": true, "maxRestarts": 3, "trustRequired": true,
                                "configHash": "c2"},
                       "status": {"phase": "Pending", "restarts": 0, "conditions": []}}],
            "removed": [{"kind": "McpServer", "name": "gone"}]
        }))
        .unwrap()
    }

    #[test]
    fn the_document_is_written_as_serde_json_writes_it_and_only_changed_items_again() {
        let mut memo = HashMap::new();
        let first = serialize(&mut memo, doc(0), false).unwrap();
        assert_eq!(first.get(), serde_json::to_string(&doc(0)).unwrap());
        let items_then: Vec<Arc<RawValue>> = memo.values().map(|(_, j)| j.clone()).collect();

        let second = serialize(&mut memo, doc(1), false).unwrap();
        assert_eq!(second.get(), serde_json::to_string(&doc(1)).unwrap());
        let kept = |name: &str, mcp: bool| {
            let now = &memo[&(false, mcp, name.to_owned())].1;
            items_then.iter().any(|j| Arc::ptr_eq(j, now))
        };
        assert!(
            kept("a", true) && kept("a", false),
            "unchanged items reused"
        );
        assert!(!kept("b", true), "the changed item serialized again");

        // The view with secrets has its own items; both stay.
        serialize(&mut memo, doc(1), true).unwrap();
        assert_eq!(memo.len(), 6);
    }
}

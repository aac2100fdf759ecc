//! The `WorkspaceStatus` view: the status store's document over the current
//! snapshot (secrets hidden unless asked), plus what readers further down
//! the flow add to it (the agent endpoint's clients and call counters, as a
//! [`Decoration`]). `steward status` is answered from the last document's
//! JSON while nothing it was built from has changed.

use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;
use steward_schema::resource::WorkspaceStatus;

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
}

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
        }
    }

    /// The status store the document is built from (its version moves on
    /// every change a `--watch` must see).
    pub fn status(&self) -> &Arc<StatusStore> {
        &self.status
    }

    /// The document now.
    pub fn document(&self, show_secrets: bool) -> WorkspaceStatus {
        self.build(&self.store.snapshot(), show_secrets)
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
        let json: Arc<RawValue> =
            serde_json::value::to_raw_value(&self.build(&snapshot, show_secrets))?.into();
        *cached = Some(Cached {
            versions,
            snapshot,
            json: json.clone(),
        });
        Ok(json)
    }

    fn build(&self, snapshot: &Snapshot, show_secrets: bool) -> WorkspaceStatus {
        let mut doc = self.status.workspace_status_shown(snapshot, show_secrets);
        self.decoration.decorate(&mut doc);
        doc
    }
}

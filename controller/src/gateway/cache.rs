//! The catalog cache: what each MCP server offered the last time it ran,
//! so that the next controller lists it at once instead of after its start.
//!
//! After a server's discovery its catalog — tools, prompts, resources,
//! resource templates, as the server described them (before the entry's
//! filters and the pins), its `instructions` and `serverInfo` — is stored
//! under its name with the `configHash` it ran under, in
//! `HOME_DIR/steward/<workspace>/catalogCache.json` (0600, one file per
//! workspace, replaced whole). A server that starts is listed from its
//! entry only for the same `configHash`; an idle one (`--start lazy`,
//! `--idle-stop`) whose configuration was edited since lists the entry of
//! the configuration it last ran until a call starts it. What is listed goes
//! through the entry's filters and the pins ([`super::pins::Pins::screen`])
//! first, so the cache never lists a filtered or quarantined definition.
//! When the server is Ready its live catalog replaces the entry if it
//! differs.
//!
//! Writes are batched on a blocking thread (a durable write takes ~10 ms and
//! a cold start stores every server at once, from the reconcile workers): a
//! cold start of 100 servers writes the file a few times, not 100 times.
//! A file that cannot be read is an empty cache (and a log line).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::model::{Implementation, Prompt, Resource, ResourceTemplate, Tool};
use serde::{Deserialize, Serialize};

use crate::observe::clock::now_rfc3339;
use crate::runtime::mcp::McpLists;
use crate::support::fs::CoalescedFile;
use crate::support::sync::lock;

/// The version of the file format this controller writes and reads; a file
/// of another version is an empty cache.
const VERSION: u32 = 1;

/// Why the cache could not be written. Messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("write the catalog cache {path}: {source}")]
    Save {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What one server offered under one `configHash`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CachedCatalog {
    pub config_hash: String,
    /// RFC 3339 time it was stored (not compared).
    #[serde(default)]
    pub stored_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_info: Option<Implementation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    #[serde(default)]
    pub tools: Vec<Tool>,
    #[serde(default)]
    pub prompts: Vec<Prompt>,
    #[serde(default)]
    pub resources: Vec<Resource>,
    #[serde(default)]
    pub resource_templates: Vec<ResourceTemplate>,
    /// The server asked an agent something on a connection that cannot
    /// say for which call: the next controller serializes the calls of
    /// different agents to it from the start (see `runtime::mcp::relay`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub asks: bool,
}

impl CachedCatalog {
    /// The entry for `lists`, offered under `config_hash`.
    pub fn new(
        config_hash: &str,
        lists: &McpLists,
        instructions: Option<String>,
        server_info: Option<Implementation>,
    ) -> CachedCatalog {
        CachedCatalog {
            config_hash: config_hash.to_owned(),
            stored_at: String::new(),
            server_info,
            instructions,
            tools: lists.tools.clone(),
            prompts: lists.prompts.clone(),
            resources: lists.resources.clone(),
            resource_templates: lists.templates.clone(),
            asks: false,
        }
    }

    /// The lists as the server gave them.
    pub fn lists(&self) -> McpLists {
        McpLists {
            tools: self.tools.clone(),
            prompts: self.prompts.clone(),
            resources: self.resources.clone(),
            templates: self.resource_templates.clone(),
        }
    }

    /// The same catalog, whenever it was stored.
    fn same(&self, other: &CachedCatalog) -> bool {
        self.config_hash == other.config_hash
            && self.server_info == other.server_info
            && self.instructions == other.instructions
            && self.tools == other.tools
            && self.prompts == other.prompts
            && self.resources == other.resources
            && self.resource_templates == other.resource_templates
            && self.asks == other.asks
    }
}

/// `catalogCache.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CacheFile {
    version: u32,
    /// The canonical workspace root (for a reader of the file).
    #[serde(default)]
    workspace: String,
    #[serde(default)]
    servers: BTreeMap<String, CachedCatalog>,
}

#[derive(Debug, Default)]
struct Inner {
    file: CacheFile,
}

/// The cache file and its content (see the module doc).
pub struct CatalogCache {
    disk: Arc<CoalescedFile>,
    inner: Mutex<Inner>,
}

impl fmt::Debug for CatalogCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CatalogCache")
            .field("path", &self.disk.path())
            .finish_non_exhaustive()
    }
}

impl CatalogCache {
    /// The cache in `path`: empty when the file is absent, and when it
    /// cannot be read or is of another version (logged; the next store
    /// replaces it).
    pub fn load(path: PathBuf, workspace: &Path) -> CatalogCache {
        let unreadable = |error: &dyn fmt::Display| {
            tracing::warn!(file = %path.display(), %error, "the catalog cache cannot be read; starting without it");
            CacheFile::default()
        };
        let mut file = match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<CacheFile>(&bytes) {
                Ok(file) if file.version == VERSION => file,
                Ok(file) => unreadable(&format!("unknown version {}", file.version)),
                Err(error) => unreadable(&error),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => CacheFile::default(),
            Err(error) => unreadable(&error),
        };
        file.version = VERSION;
        file.workspace = workspace.display().to_string();
        CatalogCache {
            disk: Arc::new(CoalescedFile::new(path)),
            inner: Mutex::new(Inner { file }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// What `server` offered the last time it ran under `config_hash`.
    /// Whether `server`, under `config_hash`, is known to ask its agents
    /// things ([`CachedCatalog::asks`]); read without copying its catalog.
    pub fn asks(&self, server: &str, config_hash: &str) -> bool {
        self.lock()
            .file
            .servers
            .get(server)
            .is_some_and(|c| c.config_hash == config_hash && c.asks)
    }

    pub fn get(&self, server: &str, config_hash: &str) -> Option<CachedCatalog> {
        self.last(server).filter(|c| c.config_hash == config_hash)
    }

    /// What `server` offered the last time it ran, whatever its
    /// configuration was then.
    pub fn last(&self, server: &str) -> Option<CachedCatalog> {
        self.lock().file.servers.get(server).cloned()
    }

    /// The servers with an entry, whatever its `configHash`.
    pub fn servers(&self) -> Vec<String> {
        self.lock().file.servers.keys().cloned().collect()
    }

    /// `server` offers `catalog` now: replace its entry when it differs,
    /// written soon. Returns whether it differed.
    pub fn store(self: &Arc<Self>, server: &str, mut catalog: CachedCatalog) -> bool {
        {
            let mut inner = self.lock();
            if inner
                .file
                .servers
                .get(server)
                .is_some_and(|old| old.same(&catalog))
            {
                return false;
            }
            catalog.stored_at = now_rfc3339();
            inner.file.servers.insert(server.to_owned(), catalog);
            self.disk.mark_dirty();
        }
        tracing::debug!(server, "catalog cached");
        self.save_soon();
        true
    }

    /// `server` asks its agents things on a connection that cannot say for
    /// which call ([`CachedCatalog::asks`]): noted on its entry, written
    /// soon.
    pub fn note_asks(self: &Arc<Self>, server: &str) {
        {
            let mut inner = self.lock();
            match inner.file.servers.get_mut(server) {
                Some(entry) if !entry.asks => entry.asks = true,
                _ => return,
            }
            self.disk.mark_dirty();
        }
        self.save_soon();
    }

    /// Forget `server` (it left the configuration). With `write`, soon;
    /// without, with the next write.
    pub fn remove(self: &Arc<Self>, server: &str, write: bool) {
        let mut inner = self.lock();
        if inner.file.servers.remove(server).is_none() {
            return;
        }
        self.disk.mark_dirty();
        drop(inner);
        if write {
            self.save_soon();
        }
    }

    /// The file's content now.
    fn content(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(&self.lock().file).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// Write the file if it changed since the last write.
    pub fn save(&self) -> Result<(), CacheError> {
        self.disk
            .save(|| self.content())
            .map_err(|source| CacheError::Save {
                path: self.disk.path().to_owned(),
                source,
            })
    }

    /// Write the file off the caller's path, coalescing the stores of one
    /// moment (see the module doc).
    fn save_soon(self: &Arc<Self>) {
        let cache = self.clone();
        self.disk
            .save_soon(move || cache.content(), "the cached catalogs");
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use serde_json::json;

    use super::*;

    fn lists(tools: &[&str]) -> McpLists {
        McpLists {
            tools: tools
                .iter()
                .map(|t| serde_json::from_value(json!({"name": t, "inputSchema": {}})).unwrap())
                .collect(),
            prompts: vec![serde_json::from_value(json!({"name": "p"})).unwrap()],
            ..McpLists::default()
        }
    }

    fn cache(dir: &Path) -> Arc<CatalogCache> {
        Arc::new(CatalogCache::load(dir.join("catalogCache.json"), dir))
    }

    #[test]
    fn a_stored_catalog_is_read_back_for_its_config_hash_only_from_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = cache(dir.path());
        let entry = CachedCatalog::new(
            "h1",
            &lists(&["echo", "add"]),
            Some("Use echo.".into()),
            Some(Implementation::new("srv", "1.2.3")),
        );
        assert!(store.store("s", entry.clone()));
        let path = dir.path().join("catalogCache.json");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let again = cache(dir.path());
        let got = again.get("s", "h1").expect("cached under h1");
        assert!(got.same(&entry));
        assert!(!got.stored_at.is_empty());
        assert_eq!(got.lists(), lists(&["echo", "add"]));
        assert_eq!(got.instructions.as_deref(), Some("Use echo."));
        assert_eq!(got.server_info.unwrap().name, "srv");
        assert_eq!(again.get("s", "h2"), None);
        assert_eq!(again.get("other", "h1"), None);
        let text = std::fs::read_to_string(&path).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["servers"]["s"]["configHash"], "h1");
        assert_eq!(v["servers"]["s"]["tools"][1]["name"], "add");
    }

    #[test]
    fn the_same_catalog_is_not_written_again_and_a_new_one_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = cache(dir.path());
        assert!(store.store("s", CachedCatalog::new("h", &lists(&["a"]), None, None)));
        assert!(!store.store("s", CachedCatalog::new("h", &lists(&["a"]), None, None)));
        assert!(store.store("s", CachedCatalog::new("h", &lists(&["b"]), None, None)));
        assert!(store.store("s", CachedCatalog::new("h2", &lists(&["b"]), None, None)));
        let again = cache(dir.path());
        assert_eq!(again.get("s", "h"), None);
        assert_eq!(again.get("s", "h2").unwrap().lists(), lists(&["b"]));
        store.remove("s", true);
        assert!(cache(dir.path()).servers().is_empty());
    }

    #[test]
    fn a_corrupted_or_foreign_file_is_an_empty_cache_replaced_by_the_next_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalogCache.json");
        std::fs::write(&path, "{\"version\": 1, \"servers\": {\"s\": [").unwrap();
        let store = cache(dir.path());
        assert!(store.servers().is_empty());
        std::fs::write(&path, "{\"version\": 99, \"servers\": {}}").unwrap();
        assert!(cache(dir.path()).servers().is_empty());
        store.store("s", CachedCatalog::new("h", &lists(&["a"]), None, None));
        assert!(cache(dir.path()).get("s", "h").is_some());
    }
}

//! Desired state, as immutable snapshots.
//!
//! The [`DesiredStore`] owns the sources *in force* (per source, the last
//! valid content) and publishes a new [`Snapshot`] — merged desired state,
//! admission per key, generations — after each change. Cold start loads
//! leniently; every later load (a file event, `steward reload`) is strict:
//! an invalid source keeps its previous content in force and is only
//! *reported* `Invalid`, so nothing running changes.
//!
//! Applying a change returns the keys whose desired spec or admission
//! changed; those, and only those, are enqueued for reconcile.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use steward_schema::admission::{self, Blocked};
use steward_schema::desired::{self, CliOptions, DesiredLsp, DesiredMcp, DesiredState, SourceSet};
use steward_schema::load::{FileText, LoadContext, LoadMode, ParsedSource};
use steward_schema::memo::EntryMemo;
use steward_schema::resource::{ResourceKind, SourceKind, SourceStatus};

use crate::paths::Paths;
use crate::sources::{self, SourceRef};

/// A work-queue key: one server.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub kind: ResourceKind,
    pub name: String,
}

impl Key {
    pub fn mcp(name: &str) -> Self {
        Key {
            kind: ResourceKind::McpServer,
            name: name.to_owned(),
        }
    }

    pub fn lsp(name: &str) -> Self {
        Key {
            kind: ResourceKind::LspServer,
            name: name.to_owned(),
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

/// One desired server of either kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Desired<'a> {
    Mcp(&'a DesiredMcp),
    Lsp(&'a DesiredLsp),
}

impl Desired<'_> {
    pub fn config_hash(&self) -> &str {
        match self {
            Desired::Mcp(d) => &d.spec.config_hash,
            Desired::Lsp(d) => &d.spec.config_hash,
        }
    }

    pub fn source(&self) -> SourceKind {
        match self {
            Desired::Mcp(d) => d.source,
            Desired::Lsp(d) => d.source,
        }
    }
}

/// An immutable view of the desired state.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The sources in force (the last valid content of each).
    pub sources: SourceSet,
    /// Sources whose latest load failed (their previous content stays in force).
    pub invalid: BTreeMap<PathBuf, SourceStatus>,
    pub desired: DesiredState,
    /// Admission per key: `None` = admitted.
    pub admission: BTreeMap<Key, Option<Blocked>>,
    generations: BTreeMap<Key, (String, u64)>,
}

impl Snapshot {
    /// `metadata.generation` of `key` (1 for a new server).
    pub fn generation(&self, key: &Key) -> u64 {
        self.generations.get(key).map_or(1, |(_, g)| *g)
    }

    /// The desired server behind `key`.
    pub fn get(&self, key: &Key) -> Option<Desired<'_>> {
        match key.kind {
            ResourceKind::McpServer => self.desired.mcp.get(&key.name).map(Desired::Mcp),
            ResourceKind::LspServer if self.desired.lsp_enabled => {
                self.desired.lsp.get(&key.name).map(Desired::Lsp)
            }
            ResourceKind::LspServer => None,
        }
    }

    /// Admission of `key` (`None` = admitted, or not desired).
    pub fn blocked(&self, key: &Key) -> Option<&Blocked> {
        self.admission.get(key).and_then(Option::as_ref)
    }

    /// Every desired key.
    pub fn keys(&self) -> BTreeSet<Key> {
        self.admission.keys().cloned().collect()
    }

    /// `sources` of the status document: in force, with failed loads reported.
    pub fn source_statuses(&self) -> Vec<SourceStatus> {
        let mut out: Vec<SourceStatus> = self
            .sources
            .iter()
            .map(|s| {
                self.invalid
                    .get(&s.path)
                    .cloned()
                    .unwrap_or_else(|| sources::source_status(s))
            })
            .collect();
        for (path, status) in &self.invalid {
            if !out.iter().any(|s| Path::new(&s.path) == path) {
                out.push(status.clone());
            }
        }
        out
    }

    fn build(
        sources: SourceSet,
        invalid: BTreeMap<PathBuf, SourceStatus>,
        paths: &Paths,
        cli: &CliOptions,
        previous: Option<&Snapshot>,
    ) -> Snapshot {
        let desired =
            desired::desired_state(&sources, &paths.workspace, cli, &sources::resolve_existing);
        let mut admission = BTreeMap::new();
        let mut generations = BTreeMap::new();
        let mut note = |key: Key, hash: &str, blocked: Option<Blocked>| {
            let generation = match previous.and_then(|p| p.generations.get(&key)) {
                Some((h, g)) if h == hash => *g,
                Some((_, g)) => g + 1,
                None => 1,
            };
            generations.insert(key.clone(), (hash.to_owned(), generation));
            admission.insert(key, blocked);
        };
        for (name, d) in &desired.mcp {
            note(
                Key::mcp(name),
                &d.spec.config_hash,
                admission::admit_mcp(name, &d.spec, &desired),
            );
        }
        if desired.lsp_enabled {
            for (name, d) in &desired.lsp {
                note(
                    Key::lsp(name),
                    &d.spec.config_hash,
                    admission::admit_lsp(name, &d.spec, &desired),
                );
            }
        }
        Snapshot {
            sources,
            invalid,
            desired,
            admission,
            generations,
        }
    }

    /// Keys whose desired spec, source or admission differ between `self` and `next`.
    pub fn changed_keys(&self, next: &Snapshot) -> Vec<Key> {
        let keys: BTreeSet<&Key> = self.admission.keys().chain(next.admission.keys()).collect();
        keys.into_iter()
            .filter(|k| {
                self.get(k) != next.get(k) || self.admission.get(k) != next.admission.get(k)
            })
            .cloned()
            .collect()
    }
}

/// What applying a change did.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    /// Keys to reconcile.
    pub changed: Vec<Key>,
    /// Sources that were looked at (for "a save retries a failed server").
    pub touched: Vec<SourceKind>,
    /// Sources rejected by this load (their previous content stays in force).
    pub rejected: Vec<SourceStatus>,
    /// Whether `mcp.serverCommand` changed (restart-only setting).
    pub server_command_changed: bool,
}

/// Owner of the desired state; mutated only by the controller's event loop.
#[derive(Debug)]
pub struct DesiredStore {
    paths: Paths,
    env: BTreeMap<String, String>,
    cli: CliOptions,
    mcp_config: Vec<String>,
    current: RwLock<Arc<Snapshot>>,
    /// The last strict load of each watched file, with the text it came from.
    last_load: Mutex<HashMap<PathBuf, (FileText, ParsedSource)>>,
    /// Built entries of every load, so a reload rebuilds only what changed.
    memo: EntryMemo,
    /// `mcp.serverCommand` as of controller start (restart-only).
    initial_server_command: Option<String>,
}

impl DesiredStore {
    /// Load every source leniently (cold start).
    pub fn cold_start(
        paths: Paths,
        env: BTreeMap<String, String>,
        cli: CliOptions,
        mcp_config: Vec<String>,
    ) -> Self {
        let memo = EntryMemo::new();
        let cx = LoadContext {
            memo: Some(&memo),
            ..sources::context(&paths, &env, LoadMode::Lenient)
        };
        let set = sources::load_all(&paths, &mcp_config, &cx);
        let snap = Snapshot::build(set, BTreeMap::new(), &paths, &cli, None);
        let initial_server_command = snap.desired.policy.mcp_server_command.clone();
        DesiredStore {
            paths,
            env,
            cli,
            mcp_config,
            current: RwLock::new(Arc::new(snap)),
            last_load: Mutex::new(HashMap::new()),
            memo,
            initial_server_command,
        }
    }

    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    /// The snapshot in force.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Files whose changes are applied live (extensions are read at start
    /// and on `steward reload` only).
    pub fn watched_files(&self) -> Vec<PathBuf> {
        let p = &self.paths;
        vec![
            p.system_defaults.clone(),
            p.user_settings.clone(),
            p.workspace_settings.clone(),
            p.system_settings.clone(),
            p.mcp_json.clone(),
            p.lsp_json.clone(),
            p.trusted_folders.clone(),
            p.approvals.clone(),
        ]
    }

    /// Which source `path` is, if it is one that is watched.
    pub fn source_of(&self, path: &Path) -> Option<SourceRef> {
        let p = &self.paths;
        let settings = [
            (&p.system_defaults, SourceKind::SystemDefaults),
            (&p.user_settings, SourceKind::UserSettings),
            (&p.workspace_settings, SourceKind::WorkspaceSettings),
            (&p.system_settings, SourceKind::SystemSettings),
        ];
        // The system layer wins if two settings paths coincide.
        if let Some((_, kind)) = settings.iter().rev().find(|(sp, _)| sp.as_path() == path) {
            return Some(SourceRef::Settings(*kind));
        }
        if path == p.mcp_json {
            Some(SourceRef::McpJson)
        } else if path == p.lsp_json {
            Some(SourceRef::LspJson)
        } else if path == p.trusted_folders {
            Some(SourceRef::TrustedFolders)
        } else if path == p.approvals {
            Some(SourceRef::Approvals)
        } else {
            None
        }
    }

    /// Load `which` strictly, as a hot reload would (no state change). The
    /// watcher judges a file with this and the event loop then applies it:
    /// the last load per path is remembered with its text, so the same
    /// content is parsed and validated once.
    pub fn load_strict(&self, which: &SourceRef) -> ParsedSource {
        let path = sources::path_of(which, &self.paths);
        let text = sources::read_file(&path);
        let mut cache = self
            .last_load
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((cached_text, parsed)) = cache.get(&path)
            && *cached_text == text
        {
            return parsed.clone();
        }
        let parsed = sources::load_text(which, &self.paths, &text, &self.strict_context());
        cache.insert(path, (text, parsed.clone()));
        parsed
    }

    /// Apply a change of the watched file `path` (strict).
    pub fn apply_file(&self, path: &Path) -> Applied {
        let Some(which) = self.source_of(path) else {
            return Applied::default();
        };
        let loaded = self.load_strict(&which);
        let current = self.snapshot();
        let mut set = current.sources.clone();
        let mut invalid = current.invalid.clone();
        let touched = vec![loaded.kind];
        let mut rejected = Vec::new();
        if loaded.is_valid() {
            invalid.remove(&loaded.path);
            if let Some(slot) = slot(&mut set, &which) {
                *slot = loaded;
            }
        } else {
            rejected.push(sources::source_status(&loaded));
            invalid.insert(loaded.path.clone(), sources::source_status(&loaded));
        }
        self.publish(set, invalid, touched, rejected)
    }

    /// Reload every source strictly (extensions re-listed and re-read).
    pub fn reload_all(&self) -> Applied {
        let fresh = sources::load_all(&self.paths, &self.mcp_config, &self.strict_context());
        let current = self.snapshot();
        let mut invalid = BTreeMap::new();
        let mut rejected = Vec::new();
        let mut touched = Vec::new();
        let mut keep = |old: &ParsedSource, new: ParsedSource| -> ParsedSource {
            touched.push(new.kind);
            if new.is_valid() {
                new
            } else {
                rejected.push(sources::source_status(&new));
                invalid.insert(new.path.clone(), sources::source_status(&new));
                old.clone()
            }
        };
        let old = &current.sources;
        let mut set = SourceSet {
            system_defaults: keep(&old.system_defaults, fresh.system_defaults),
            user_settings: keep(&old.user_settings, fresh.user_settings),
            workspace_settings: keep(&old.workspace_settings, fresh.workspace_settings),
            system_settings: keep(&old.system_settings, fresh.system_settings),
            mcp_json: keep(&old.mcp_json, fresh.mcp_json),
            lsp_json: keep(&old.lsp_json, fresh.lsp_json),
            extensions: Vec::new(),
            cli_mcp: Vec::new(),
            trusted_folders: keep(&old.trusted_folders, fresh.trusted_folders),
            approvals: keep(&old.approvals, fresh.approvals),
        };
        for ext in fresh.extensions {
            match old.extensions.iter().find(|o| o.path == ext.path) {
                Some(o) => set.extensions.push(keep(o, ext)),
                // A new extension that does not load contributes nothing
                // (`keep` falls back to an empty source).
                None => {
                    let empty = ParsedSource::absent(ext.kind, ext.path.clone());
                    let kept = keep(&empty, ext);
                    if kept.is_valid()
                        && kept.state != steward_schema::resource::SourceState::Absent
                    {
                        set.extensions.push(kept);
                    }
                }
            }
        }
        for (old_cli, new_cli) in old.cli_mcp.iter().zip(fresh.cli_mcp) {
            set.cli_mcp.push(keep(old_cli, new_cli));
        }
        self.publish(set, invalid, touched, rejected)
    }

    /// How hot reloads load: strictly, through the memo.
    fn strict_context(&self) -> LoadContext<'_> {
        LoadContext {
            memo: Some(&self.memo),
            ..sources::context(&self.paths, &self.env, LoadMode::Strict)
        }
    }

    fn publish(
        &self,
        set: SourceSet,
        invalid: BTreeMap<PathBuf, SourceStatus>,
        touched: Vec<SourceKind>,
        rejected: Vec<SourceStatus>,
    ) -> Applied {
        let mut guard = self.current.write().unwrap_or_else(PoisonError::into_inner);
        let next = Snapshot::build(set, invalid, &self.paths, &self.cli, Some(&guard));
        let changed = guard.changed_keys(&next);
        let server_command_changed =
            next.desired.policy.mcp_server_command != self.initial_server_command;
        *guard = Arc::new(next);
        Applied {
            changed,
            touched,
            rejected,
            server_command_changed,
        }
    }
}

fn slot<'a>(set: &'a mut SourceSet, which: &SourceRef) -> Option<&'a mut ParsedSource> {
    Some(match which {
        SourceRef::Settings(SourceKind::SystemDefaults) => &mut set.system_defaults,
        SourceRef::Settings(SourceKind::UserSettings) => &mut set.user_settings,
        SourceRef::Settings(SourceKind::WorkspaceSettings) => &mut set.workspace_settings,
        SourceRef::Settings(_) => &mut set.system_settings,
        SourceRef::McpJson => &mut set.mcp_json,
        SourceRef::LspJson => &mut set.lsp_json,
        SourceRef::TrustedFolders => &mut set.trusted_folders,
        SourceRef::Approvals => &mut set.approvals,
        // Extensions are not watched; `reload_all` handles them.
        SourceRef::Extension(_) => return None,
    })
}

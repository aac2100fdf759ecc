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
use steward_schema::load::{self, EntrySpans, FileText, LoadContext, LoadMode, ParsedSource};
use steward_schema::memo::EntryMemo;
use steward_schema::resource::{
    LspServerSpec, McpServerSpec, ResourceKind, SourceKind, SourceStatus,
};

use crate::desired::sources::{self, SourceRef};
use crate::support::paths::Paths;

/// A work-queue key: one server. Serialized as `{"kind", "name"}` (the
/// stopped set's file format).
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
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
    /// Every desired key, with its admission and generation.
    entries: BTreeMap<Key, Entry>,
    /// Counts published snapshots (0 at cold start): an outcome decided on
    /// an older snapshot is recognised as such.
    pub epoch: u64,
}

/// What the snapshot knows of one desired key. The spec is the desired
/// state's own (shared), and `Arc` equality of `Eq` types compares pointers
/// first, so comparing two snapshots' entries is O(1) for every server a
/// change did not touch.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    source: SourceKind,
    spec: EntrySpec,
    /// `None` = admitted.
    blocked: Option<Blocked>,
    generation: u64,
}

#[derive(Debug, Clone, PartialEq)]
enum EntrySpec {
    Mcp(Arc<McpServerSpec>),
    Lsp(Arc<LspServerSpec>),
}

impl EntrySpec {
    fn config_hash(&self) -> &str {
        match self {
            EntrySpec::Mcp(s) => &s.config_hash,
            EntrySpec::Lsp(s) => &s.config_hash,
        }
    }
}

impl Snapshot {
    /// `metadata.generation` of `key` (1 for a new server).
    pub fn generation(&self, key: &Key) -> u64 {
        self.entries.get(key).map_or(1, |e| e.generation)
    }

    /// Whether `key` is desired.
    pub fn contains(&self, key: &Key) -> bool {
        self.entries.contains_key(key)
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
        self.entries.get(key).and_then(|e| e.blocked.as_ref())
    }

    /// Every desired key.
    pub fn keys(&self) -> BTreeSet<Key> {
        self.entries.keys().cloned().collect()
    }

    /// Every desired key, in order, without copying.
    pub fn key_iter(&self) -> impl Iterator<Item = &Key> {
        self.entries.keys()
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
        let cli = CliOptions {
            home: paths.user_home.clone(),
            ..cli.clone()
        };
        let desired =
            desired::desired_state(&sources, &paths.workspace, &cli, &sources::resolve_existing);
        // Admission depends on the spec, the policy and the approvals (and
        // the profiles they were given for): with those unchanged, a key
        // whose spec is the same keeps its admission. Keys come in order, so
        // the previous entries are walked alongside instead of looked up.
        let same_gates = previous.is_some_and(|p| {
            p.desired.policy == desired.policy
                && p.desired.approvals == desired.approvals
                && p.desired.sandbox_approvals == desired.sandbox_approvals
                && p.desired.workspace == desired.workspace
        });
        let mut before = previous.map(|p| p.entries.iter().peekable());
        let mut entry = |key: Key, source: SourceKind, spec: EntrySpec| {
            let old = before.as_mut().and_then(|it| {
                while it.next_if(|(k, _)| **k < key).is_some() {}
                it.next_if(|(k, _)| **k == key).map(|(_, e)| e)
            });
            // `Arc` equality compares pointers first: O(1) for unchanged entries.
            let reuse = old.filter(|o| same_gates && o.spec == spec);
            let blocked = match (reuse, &spec) {
                (Some(o), _) => o.blocked.clone(),
                (None, EntrySpec::Mcp(s)) => admission::admit_mcp(&key.name, s, &desired),
                (None, EntrySpec::Lsp(s)) => admission::admit_lsp(&key.name, s, &desired),
            };
            let generation = match old {
                Some(o) if o.spec.config_hash() == spec.config_hash() => o.generation,
                Some(o) => o.generation + 1,
                None => 1,
            };
            let entry = Entry {
                source,
                spec,
                blocked,
                generation,
            };
            (key, entry)
        };
        // Sorted by key (MCP before LSP, then by name): built in one pass.
        let mut entries: Vec<(Key, Entry)> =
            Vec::with_capacity(desired.mcp.len() + desired.lsp.len());
        for (name, d) in &desired.mcp {
            entries.push(entry(
                Key::mcp(name),
                d.source,
                EntrySpec::Mcp(d.spec.clone()),
            ));
        }
        if desired.lsp_enabled {
            for (name, d) in &desired.lsp {
                entries.push(entry(
                    Key::lsp(name),
                    d.source,
                    EntrySpec::Lsp(d.spec.clone()),
                ));
            }
        }
        Snapshot {
            sources,
            invalid,
            entries: entries.into_iter().collect(),
            desired,
            epoch: previous.map_or(0, |p| p.epoch + 1),
        }
    }

    /// Keys whose desired spec, source or admission differ between `self` and `next`.
    pub fn changed_keys(&self, next: &Snapshot) -> Vec<Key> {
        let (mut a, mut b) = (
            self.entries.iter().peekable(),
            next.entries.iter().peekable(),
        );
        let mut changed = Vec::new();
        loop {
            let (key, differs) = match (a.peek(), b.peek()) {
                (None, None) => return changed,
                (Some((ka, _)), Some((kb, _))) if ka < kb => (a.next().map(|(k, _)| k), true),
                (Some((ka, _)), Some((kb, _))) if ka > kb => (b.next().map(|(k, _)| k), true),
                (Some(_), Some(_)) => {
                    let ((key, ea), (_, eb)) =
                        (a.next().expect("peeked"), b.next().expect("peeked"));
                    let same =
                        ea.source == eb.source && ea.blocked == eb.blocked && ea.spec == eb.spec;
                    (Some(key), !same)
                }
                (Some(_), None) => (a.next().map(|(k, _)| k), true),
                (None, Some(_)) => (b.next().map(|(k, _)| k), true),
            };
            if differs && let Some(key) = key {
                changed.push(key.clone());
            }
        }
    }
}

/// What applying a change did.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    /// Keys to reconcile.
    pub changed: Vec<Key>,
    /// The epoch of the snapshot this change published.
    pub epoch: u64,
    /// Sources that were looked at (for "a save retries a failed server").
    pub touched: Vec<SourceKind>,
    /// Sources rejected by this load (their previous content stays in force).
    pub rejected: Vec<SourceStatus>,
    /// Whether `mcp.serverCommand` changed (restart-only setting).
    pub server_command_changed: bool,
}

/// A strict load and the text it came from.
#[derive(Debug)]
struct LastLoad {
    text: FileText,
    parsed: ParsedSource,
    /// Where its entries are, when the next edit may reload one alone.
    spans: Option<EntrySpans>,
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
    last_load: Mutex<HashMap<PathBuf, LastLoad>>,
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
        set.iter().for_each(sources::log_findings);
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

    /// Files whose changes are applied live ([`Paths::watched_files`]).
    pub fn watched_files(&self) -> Vec<PathBuf> {
        self.paths.watched_files()
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
        // The system layer wins if two settings paths coincide, but the
        // workspace layer never takes the user file (workspace = home: the
        // merge drops that layer).
        let same_as_user = p.workspace_settings == p.user_settings;
        if let Some((_, kind)) = settings.iter().rev().find(|(sp, kind)| {
            sp.as_path() == path && !(same_as_user && *kind == SourceKind::WorkspaceSettings)
        }) {
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
        } else if path == p.sandbox_approvals {
            Some(SourceRef::SandboxApprovals)
        } else {
            None
        }
    }

    /// Load `which` strictly, as a hot reload would (no state change). The
    /// watcher judges a file with this and the event loop then applies it:
    /// the last load per path is remembered with its text, so the same
    /// content is parsed and validated once.
    /// An edit confined to one server entry of a valid file re-reads that
    /// entry alone (see `steward_schema::load::reload_edited_entry`).
    pub fn load_strict(&self, which: &SourceRef) -> ParsedSource {
        let path = sources::path_of(which, &self.paths);
        let text = sources::read_file(&path);
        let cx = self.strict_context();
        let mut cache = self
            .last_load
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let previous = cache.get(&path);
        if let Some(last) = previous
            && last.text == text
        {
            return last.parsed.clone();
        }
        let edited = match (previous, &text) {
            (
                Some(LastLoad {
                    text: FileText::Text(old),
                    parsed,
                    spans: Some(spans),
                }),
                FileText::Text(new),
            ) => load::reload_edited_entry(parsed, spans, old, new, &cx),
            _ => None,
        };
        let (parsed, spans) = match edited {
            Some((parsed, spans)) => (parsed, Some(spans)),
            None => {
                let parsed = sources::load_text(which, &self.paths, &text, &cx);
                let spans = if parsed.is_valid() {
                    load::entry_spans(parsed.kind, &text)
                } else {
                    None
                };
                (parsed, spans)
            }
        };
        cache.insert(
            path,
            LastLoad {
                text,
                parsed: parsed.clone(),
                spans,
            },
        );
        parsed
    }

    /// Apply a change of the watched file `path` (strict).
    pub fn apply_file(&self, path: &Path) -> Applied {
        let Some(which) = self.source_of(path) else {
            return Applied::default();
        };
        let loaded = self.load_strict(&which);
        self.apply_loaded(&which, loaded)
    }

    /// Level-triggered resync of the watched file `path`: load it strictly
    /// and apply it only when that differs from what is in force for it (a
    /// change the watcher missed). `None` when nothing differs, so a resync
    /// of unchanged files neither logs nor retries anything.
    pub fn resync_file(&self, path: &Path) -> Option<Applied> {
        let which = self.source_of(path)?;
        let loaded = self.load_strict(&which);
        let current = self.snapshot();
        let mut set = current.sources.clone();
        let in_force = slot(&mut set, &which)?;
        let reported = current.invalid.get(&loaded.path);
        let same = if loaded.is_valid() {
            reported.is_none()
                && in_force.state == loaded.state
                && in_force.content == loaded.content
        } else {
            match reported {
                Some(status) => *status == sources::source_status(&loaded),
                // Cold start loaded it leniently and reported it already.
                None => {
                    in_force.state == loaded.state && in_force.diagnostics == loaded.diagnostics
                }
            }
        };
        (!same).then(|| self.apply_loaded(&which, loaded))
    }

    /// Apply the watched file `path` as the watcher's judge last loaded it
    /// (it loads every change before emitting it, and a later change is
    /// judged and emitted again), reading it only if it never was.
    pub fn apply_judged(&self, path: &Path) -> Applied {
        let Some(which) = self.source_of(path) else {
            return Applied::default();
        };
        let judged = self
            .last_load
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&sources::path_of(&which, &self.paths))
            .map(|last| last.parsed.clone());
        let loaded = judged.unwrap_or_else(|| self.load_strict(&which));
        self.apply_loaded(&which, loaded)
    }

    fn apply_loaded(&self, which: &SourceRef, loaded: ParsedSource) -> Applied {
        let current = self.snapshot();
        // Log what this load found, once: not when it is what is in force.
        if !current.sources.iter().any(|s| *s == loaded) {
            sources::log_findings(&loaded);
        }
        let mut set = current.sources.clone();
        let mut invalid = current.invalid.clone();
        let touched = vec![loaded.kind];
        let mut rejected = Vec::new();
        if loaded.is_valid() {
            invalid.remove(&loaded.path);
            if let Some(slot) = slot(&mut set, which) {
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
        for source in fresh.iter() {
            if !current.sources.iter().any(|s| s == source) {
                sources::log_findings(source);
            }
        }
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
            sandbox_approvals: keep(&old.sandbox_approvals, fresh.sandbox_approvals),
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
        let epoch = next.epoch;
        *guard = Arc::new(next);
        Applied {
            changed,
            epoch,
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
        SourceRef::SandboxApprovals => &mut set.sandbox_approvals,
        // Extensions are not watched; `reload_all` handles them.
        SourceRef::Extension(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use steward_schema::formats::ApprovalStatus;
    use steward_schema::resource::Reason;

    use super::*;

    struct Fixture {
        _dir: tempfile::TempDir,
        store: DesiredStore,
    }

    fn fixture(user: &str, workspace: Option<&str>) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join(".qwen")).unwrap();
        let env = BTreeMap::from([(
            "QWEN_HOME".to_owned(),
            dir.path().join("home").to_string_lossy().into_owned(),
        )]);
        let paths = Paths::resolve(&ws, &env).unwrap();
        write(&paths.user_settings, user);
        if let Some(w) = workspace {
            write(&paths.workspace_settings, w);
        }
        let cli = CliOptions {
            lsp_enabled: true,
            ..CliOptions::default()
        };
        let store = DesiredStore::cold_start(paths, env, cli, Vec::new());
        Fixture { _dir: dir, store }
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    impl Fixture {
        fn edit_user(&self, text: &str) -> Applied {
            let path = self.store.paths().user_settings.clone();
            write(&path, text);
            self.store.apply_file(&path)
        }
    }

    const TWO: &str = r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}}"#;

    #[test]
    fn an_edit_changes_only_its_key_and_a_new_hash_bumps_the_generation() {
        let f = fixture(TWO, None);
        let (a, b) = (Key::mcp("a"), Key::mcp("b"));
        assert_eq!(f.store.snapshot().generation(&b), 1);
        let applied =
            f.edit_user(r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "z"}}}"#);
        assert_eq!(applied.changed, vec![b.clone()]);
        let snap = f.store.snapshot();
        assert_eq!((snap.generation(&a), snap.generation(&b)), (1, 2));
        // A description is not part of the hash: changed (re-filter), same generation.
        let applied = f.edit_user(
            r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "z", "description": "d"}}}"#,
        );
        assert_eq!(applied.changed, vec![b.clone()]);
        assert_eq!(f.store.snapshot().generation(&b), 2);
        // Formatting only: nothing.
        let applied = f.edit_user(
            "{\"mcpServers\": {\n \"b\": {\"description\": \"d\", \"command\": \"z\"},\n \"a\": {\"command\": \"x\"}}}",
        );
        assert!(applied.changed.is_empty(), "{:?}", applied.changed);
    }

    #[test]
    fn resync_applies_a_change_nobody_reported_and_only_once() {
        let f = fixture(TWO, Some("{}"));
        let user = f.store.paths().user_settings.clone();
        let ws = f.store.paths().workspace_settings.clone();
        // Unchanged since cold start (valid, and absent): nothing to do.
        for path in f.store.watched_files() {
            assert!(f.store.resync_file(&path).is_none(), "{}", path.display());
        }
        write(&user, r#"{"mcpServers": {"a": {"command": "x"}}}"#);
        let applied = f.store.resync_file(&user).expect("the missed edit");
        assert_eq!(applied.changed, vec![Key::mcp("b")]);
        assert!(f.store.resync_file(&user).is_none());
        // A formatting-only change is no change.
        write(&user, r#"{ "mcpServers": { "a": { "command": "x" } } }"#);
        assert!(f.store.resync_file(&user).is_none());
        // An invalid file is rejected (and reported) once.
        write(&ws, "{");
        let applied = f.store.resync_file(&ws).expect("the invalid edit");
        assert!(applied.changed.is_empty() && applied.rejected.len() == 1);
        assert!(f.store.resync_file(&ws).is_none());
        // Valid again with the content in force: the report is cleared.
        write(&ws, "{}");
        let applied = f.store.resync_file(&ws).expect("the repair");
        assert!(applied.rejected.is_empty());
        assert!(f.store.snapshot().invalid.is_empty());
        assert!(f.store.resync_file(&ws).is_none());
    }

    #[test]
    fn added_and_removed_keys_are_changed() {
        let f = fixture(TWO, None);
        let applied =
            f.edit_user(r#"{"mcpServers": {"b": {"command": "y"}, "c": {"command": "w"}}}"#);
        assert_eq!(applied.changed, vec![Key::mcp("a"), Key::mcp("c")]);
        let snap = f.store.snapshot();
        assert!(!snap.contains(&Key::mcp("a")) && snap.contains(&Key::mcp("c")));
        assert_eq!(snap.generation(&Key::mcp("c")), 1);
    }

    #[test]
    fn a_policy_change_decides_admission_again_for_unchanged_specs() {
        let f = fixture(TWO, None);
        let applied = f.edit_user(
            r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}, "mcp": {"excluded": ["b"]}}"#,
        );
        assert_eq!(applied.changed, vec![Key::mcp("b")]);
        let snap = f.store.snapshot();
        assert_eq!(
            snap.blocked(&Key::mcp("b")).map(|b| b.reason),
            Some(Reason::Excluded)
        );
        assert!(snap.blocked(&Key::mcp("a")).is_none());
    }

    #[test]
    fn an_approval_decides_admission_again_for_unchanged_specs() {
        let f = fixture("{}", Some(TWO));
        let snap = f.store.snapshot();
        let b = Key::mcp("b");
        assert_eq!(
            snap.blocked(&b).map(|b| b.reason),
            Some(Reason::PendingApproval)
        );
        let Some(Desired::Mcp(d)) = snap.get(&b) else {
            panic!("b is desired");
        };
        let paths = f.store.paths();
        crate::desired::approvals::record(
            &paths.approvals,
            &paths.workspace,
            &[(
                "b".to_owned(),
                d.spec.approval_hash.clone(),
                ApprovalStatus::Approved,
            )],
        )
        .unwrap();
        let applied = f.store.apply_file(&paths.approvals.clone());
        assert_eq!(applied.changed, vec![b.clone()]);
        assert!(f.store.snapshot().blocked(&b).is_none());
        assert_eq!(
            f.store.snapshot().blocked(&Key::mcp("a")).map(|b| b.reason),
            Some(Reason::PendingApproval)
        );
    }

    /// Issue 10 (21): an approvals path that became a directory is an
    /// unreadable source, rejected like a corrupt file: the approvals in
    /// force stay, and the source reports the error.
    #[test]
    fn an_unreadable_approvals_path_keeps_the_approvals_in_force() {
        let f = fixture("{}", Some(TWO));
        let b = Key::mcp("b");
        let snap = f.store.snapshot();
        let Some(Desired::Mcp(d)) = snap.get(&b) else {
            panic!("b is desired");
        };
        let paths = f.store.paths().clone();
        crate::desired::approvals::record(
            &paths.approvals,
            &paths.workspace,
            &[(
                "b".to_owned(),
                d.spec.approval_hash.clone(),
                ApprovalStatus::Approved,
            )],
        )
        .unwrap();
        f.store.apply_file(&paths.approvals);
        assert!(f.store.snapshot().blocked(&b).is_none());

        let corrupt = || {
            std::fs::write(&paths.approvals, "{").unwrap();
        };
        let directory = || {
            std::fs::remove_file(&paths.approvals).unwrap();
            std::fs::create_dir(&paths.approvals).unwrap();
        };
        let cases: [(&str, &dyn Fn()); 2] =
            [("a corrupt file", &corrupt), ("a directory", &directory)];
        for (what, make) in cases {
            make();
            let applied = f.store.apply_file(&paths.approvals);
            assert!(applied.changed.is_empty(), "{what}: {:?}", applied.changed);
            assert_eq!(applied.rejected.len(), 1, "{what}: reported");
            let snap = f.store.snapshot();
            assert!(snap.blocked(&b).is_none(), "{what} stopped the approved b");
            assert!(
                snap.invalid.contains_key(&paths.approvals),
                "{what}: the source is reported invalid"
            );
            assert!(f.store.resync_file(&paths.approvals).is_none(), "{what}");
            let reloaded = f.store.reload_all();
            assert!(
                reloaded.changed.is_empty(),
                "{what}: {:?}",
                reloaded.changed
            );
            assert!(f.store.snapshot().blocked(&b).is_none(), "{what}: reload");
        }
    }
}

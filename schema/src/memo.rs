//! Memo of built server entries, so that a reload rebuilds (expands,
//! normalizes, hashes) only the entries whose literal JSON changed.
//!
//! An entry's build depends on its literal JSON (after schema checking), on
//! where it was written (file, entry map, scope) and on the load context
//! (environment and workspace). The memo is keyed by the place, compares the
//! literal, and is cleared when the context changes — so a hit returns
//! exactly what a build would. Each load of a map replaces that map's memo
//! with the entries it saw, so the memo never holds more than the files do.
//!
//! A controller keeps one memo for its lifetime; a one-shot load
//! (`steward validate`, tests) passes none and builds everything.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

use crate::resource::{LspServerSpec, McpServerSpec, Scope};

/// Problems found while building one entry: (pointer below the entry, message).
pub type FieldErrors = Vec<(String, String)>;

/// The outcome of building one entry; shared, so a hit costs a pointer copy.
pub type Built<T> = Arc<Outcome<T>>;

/// What building one entry gave: its spec, or why it has none; and the
/// warnings (coercions, unset variables, ignored keys) either way.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome<T> {
    pub result: Result<Arc<T>, Failed<T>>,
    pub warnings: FieldErrors,
}

/// An entry that produced no spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Failed<T> {
    /// `false`: the entry is invalid (an error: a strict load rejects the
    /// source). `true`: it is skipped, as Qwen Code skips it (a warning; the
    /// rest of the source applies).
    pub skipped: bool,
    pub problems: FieldErrors,
    /// A best-effort spec, so that the entry still has a row in status.
    pub placeholder: Arc<T>,
}

impl<T> Outcome<T> {
    /// Whether the entry built with nothing to report.
    pub fn is_clean(&self) -> bool {
        self.result.is_ok() && self.warnings.is_empty()
    }
}

/// Where an entry map was written. The scope tells apart two settings
/// layers that live in the same file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct MapKey {
    path: PathBuf,
    pointer: String,
    scope: Scope,
}

#[derive(Debug)]
pub(crate) struct Memoized<T> {
    literal: Value,
    built: Built<T>,
}

pub(crate) type MapMemo<T> = HashMap<String, Memoized<T>>;

#[derive(Debug, Default)]
pub(crate) struct State {
    /// The (workspace, environment) every memoized entry was built under.
    context: Option<(PathBuf, BTreeMap<String, String>)>,
    mcp: HashMap<MapKey, MapMemo<McpServerSpec>>,
    lsp: HashMap<MapKey, MapMemo<LspServerSpec>>,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct EntryMemo {
    state: Mutex<State>,
}

/// The entry map being built, and the kind of spec it holds.
pub(crate) struct Place<'a> {
    pub path: &'a Path,
    pub pointer: &'a str,
    pub scope: Scope,
}

/// Access to the memo of one spec type.
pub(crate) trait MemoKind: Sized {
    fn maps(state: &mut State) -> &mut HashMap<MapKey, MapMemo<Self>>;
}

impl MemoKind for McpServerSpec {
    fn maps(state: &mut State) -> &mut HashMap<MapKey, MapMemo<Self>> {
        &mut state.mcp
    }
}

impl MemoKind for LspServerSpec {
    fn maps(state: &mut State) -> &mut HashMap<MapKey, MapMemo<Self>> {
        &mut state.lsp
    }
}

impl EntryMemo {
    pub fn new() -> Self {
        EntryMemo::default()
    }

    /// The map's previous entries (removed from the memo), after clearing
    /// everything if the context is not the one the memo was built under.
    fn take<T: MemoKind>(
        &self,
        key: &MapKey,
        workspace: &Path,
        env: &BTreeMap<String, String>,
    ) -> MapMemo<T> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let same = state
            .context
            .as_ref()
            .is_some_and(|(w, e)| w == workspace && e == env);
        if !same {
            *state = State {
                context: Some((workspace.to_path_buf(), env.clone())),
                ..State::default()
            };
        }
        T::maps(&mut state).remove(key).unwrap_or_default()
    }

    fn put<T: MemoKind>(&self, key: MapKey, map: MapMemo<T>) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        T::maps(&mut state).insert(key, map);
    }
}

/// `entries` are all the map's entries (the memo forgets the others), or
/// only some of them (the others stay memoized).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coverage {
    WholeMap,
    Some,
}

/// Build entries of one map, reusing the memo's result for each entry
/// whose literal is unchanged. Results come back in `entries` order.
pub(crate) fn build_entries<T: MemoKind>(
    memo: Option<&EntryMemo>,
    place: Place<'_>,
    workspace: &Path,
    env: &BTreeMap<String, String>,
    (entries, coverage): (impl IntoIterator<Item = (String, Value)>, Coverage),
    mut build: impl FnMut(&str, &Value) -> Outcome<T>,
) -> Vec<(String, Built<T>)> {
    let key = MapKey {
        path: place.path.to_path_buf(),
        pointer: place.pointer.to_owned(),
        scope: place.scope,
    };
    let mut previous: MapMemo<T> = match memo {
        Some(m) => m.take(&key, workspace, env),
        None => MapMemo::default(),
    };
    let mut next = match coverage {
        Coverage::WholeMap => MapMemo::with_capacity(previous.len()),
        // The entries not given stay: update the previous memo in place.
        Coverage::Some => std::mem::take(&mut previous),
    };
    let mut out = Vec::new();
    for (name, literal) in entries {
        let reusable = match coverage {
            Coverage::WholeMap => previous.remove(&name),
            Coverage::Some => next.remove(&name),
        };
        let memoized = match reusable {
            Some(m) if m.literal == literal => m,
            _ => Memoized {
                built: Arc::new(build(&name, &literal)),
                literal,
            },
        };
        out.push((name.clone(), memoized.built.clone()));
        if memo.is_some() {
            next.insert(name, memoized);
        }
    }
    if let Some(m) = memo {
        m.put(key, next);
    }
    out
}

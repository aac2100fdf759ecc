//! Watching the workspace root for the code-running files a server could
//! create (product.md §9): a pinned *directory* that does not exist cannot
//! be made by a sandboxed server, but a pinned *file* (`.envrc`,
//! `.mcp.json`, `.pre-commit-config.yaml`…, or a `.git` file pointing
//! elsewhere) can — holding it absent would break its readers. Its
//! appearance is reported instead (`ProtectedFileCreated`, by the event
//! loop: see `engine::sandboxed`).
//!
//! One non-recursive inotify watch on the workspace root; the watcher
//! decides nothing, it only sends the paths that appeared.

use std::path::{Path, PathBuf};

use notify::event::{ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher as _};
use steward_schema::sandbox::{PINNED, PinKind};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use super::WatchError;

/// The names at the workspace root whose appearance is reported: the
/// pinned files, and `.git` (a file there can point git elsewhere).
pub fn watched_names() -> Vec<&'static str> {
    PINNED
        .iter()
        .filter(|(rel, kind)| !rel.contains('/') && (*kind == PinKind::File || *rel == ".git"))
        .map(|(rel, _)| *rel)
        .collect()
}

/// Starts the watch of `workspace`. Keep the watcher: dropping it stops
/// the watch.
pub fn start(
    workspace: &Path,
) -> Result<(notify::RecommendedWatcher, UnboundedReceiver<PathBuf>), WatchError> {
    let (tx, rx) = unbounded_channel();
    let root = workspace.to_path_buf();
    let names = watched_names();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else {
            return;
        };
        // What appeared: a created entry, or the new name of a renamed one.
        let appeared: Vec<PathBuf> = match event.kind {
            EventKind::Create(_) | EventKind::Modify(ModifyKind::Name(RenameMode::To)) => {
                event.paths
            }
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {
                event.paths.last().cloned().into_iter().collect()
            }
            _ => return,
        };
        for path in appeared {
            let ours = path.parent() == Some(root.as_path())
                && path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| names.contains(&n));
            if ours {
                let _ = tx.send(path);
            }
        }
    })
    .map_err(WatchError::Init)?;
    watcher
        .watch(workspace, RecursiveMode::NonRecursive)
        .map_err(|source| WatchError::Watch {
            path: workspace.to_path_buf(),
            source,
        })?;
    Ok((watcher, rx))
}

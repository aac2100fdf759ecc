//! Watching the source code of servers under development (`dev.watch`):
//! another source of change events beside the config watcher.
//!
//! This module owns the step *a server's source files → "its code
//! changed"*. For each admitted server with `dev` (a [`DevTarget`], set by
//! the event loop from each new snapshot) it watches, non-recursively, every
//! directory under `dev.cwd` that may hold a watched file ([`super::tree`]:
//! directories a glob cannot reach and `node_modules`, `.git`, `target`,
//! `dist` and the like are never watched), and follows directories as they
//! appear and vanish.
//!
//! Debounce, per server, with the config watcher's window and state machine
//! ([`super::debounce`]), but trailing only: source code cannot be judged
//! before it settles, so the first event of a burst emits nothing and the
//! server's touched files are judged once they have been quiet for the
//! window — an editor's save sequence, a `git checkout`, a formatter run
//! over the tree are each one change. The judgement compares content
//! ([`super::tree`]): a change is a file whose bytes differ.
//!
//! What it observed is kept in [`DevSources`] — per server, the *code
//! generation* (how many settled changes; the reconciler compares it with
//! the generation its instance runs, level-triggered) and whether its files
//! are watched — and the server's key is sent on the returned channel so
//! the event loop enqueues it. The watcher decides nothing else.
//!
//! Cost: one thread (`steward-dev-watch`) blocked on a channel while idle;
//! notify's watcher (an inotify instance and its thread) is made only once
//! some server has `dev`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher as _};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::debounce::Debounce;
use super::tree::Tree;
use super::{Verdict, WatchError};
use crate::desired::snapshot::Key;
use crate::support::sync::lock;

/// Paths of a change kept for its event (the rest are counted).
const CHANGED_SHOWN: usize = 5;

/// One server whose source is watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevTarget {
    pub key: Key,
    /// `dev.cwd` (absolute).
    pub root: PathBuf,
    /// `dev.watch`, relative to `root`.
    pub globs: Vec<String>,
}

/// What the watcher observed of one server's source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CodeState {
    /// Settled changes so far (never goes back, even when the watch is
    /// replaced): the generation the reconciler compares.
    pub generation: u64,
    /// The files of the last change, relative to `dev.cwd` (at most
    /// [`CHANGED_SHOWN`]), and how many there were.
    pub changed: Vec<String>,
    pub changed_count: usize,
    /// Its files are watched now.
    pub watching: bool,
    /// Why they are not, when not.
    pub message: Option<String>,
    /// How many files the globs match.
    pub files: u64,
}

/// The watcher's observations, shared with the reconciler.
#[derive(Debug, Default)]
pub struct DevSources {
    states: Mutex<HashMap<Key, CodeState>>,
}

impl DevSources {
    /// What was observed of `key`'s source (`None`: never watched).
    pub fn get(&self, key: &Key) -> Option<CodeState> {
        lock(&self.states).get(key).cloned()
    }

    fn update(&self, key: &Key, f: impl FnOnce(&mut CodeState)) {
        f(lock(&self.states).entry(key.clone()).or_default());
    }
}

/// A running watch of the servers' sources. Dropping it stops the thread.
#[derive(Debug)]
pub struct DevWatcher {
    tx: mpsc::Sender<Msg>,
    thread: Option<JoinHandle<()>>,
    sources: Arc<DevSources>,
}

enum Msg {
    Event(notify::Result<notify::Event>),
    Targets(Vec<DevTarget>),
    Shutdown,
}

impl DevWatcher {
    /// Starts the watcher thread (no target yet). Keys whose code changed,
    /// or whose watch started or stopped, arrive on the returned channel.
    pub fn start(window: Duration) -> Result<(DevWatcher, UnboundedReceiver<Key>), WatchError> {
        let (tx, rx) = mpsc::channel();
        let (out, keys) = unbounded_channel();
        let sources = Arc::new(DevSources::default());
        let core = Core {
            notify: None,
            events: tx.clone(),
            window,
            out,
            sources: sources.clone(),
            trees: BTreeMap::new(),
            armed: HashMap::new(),
        };
        let thread = std::thread::Builder::new()
            .name("steward-dev-watch".into())
            .spawn(move || core.run(rx))
            .map_err(WatchError::Spawn)?;
        Ok((
            DevWatcher {
                tx,
                thread: Some(thread),
                sources,
            },
            keys,
        ))
    }

    /// What was observed, for the reconciler.
    pub fn sources(&self) -> Arc<DevSources> {
        self.sources.clone()
    }

    /// Watches exactly `targets` from now on: a target that stays as it
    /// was keeps its state, a new or changed one is walked afresh (its
    /// files as they are now are the baseline; its generation goes on), a
    /// target whose root was missing is looked for again.
    pub fn set_targets(&self, targets: Vec<DevTarget>) {
        let _ = self.tx.send(Msg::Targets(targets));
    }
}

impl Drop for DevWatcher {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Shutdown);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One watched server.
struct Watched {
    target: DevTarget,
    tree: Tree,
    debounce: Debounce,
    /// Its root was a directory when it was walked.
    rooted: bool,
}

struct Core {
    /// Made when the first target comes (a workspace without `dev` never
    /// holds an inotify instance for it).
    notify: Option<notify::RecommendedWatcher>,
    /// Where notify's callback sends its events.
    events: mpsc::Sender<Msg>,
    window: Duration,
    out: UnboundedSender<Key>,
    sources: Arc<DevSources>,
    trees: BTreeMap<Key, Watched>,
    /// Directories watched now, and by how many trees.
    armed: HashMap<PathBuf, usize>,
}

impl Core {
    fn run(mut self, rx: mpsc::Receiver<Msg>) {
        loop {
            let next = self
                .trees
                .values()
                .filter_map(|w| w.debounce.deadline())
                .min();
            let first = match next {
                None => match rx.recv() {
                    Ok(msg) => Some(msg),
                    Err(_) => return,
                },
                Some(at) => match rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                    Ok(msg) => Some(msg),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                },
            };
            if let Some(first) = first {
                for msg in std::iter::once(first).chain(rx.try_iter()) {
                    match msg {
                        Msg::Shutdown => return,
                        Msg::Targets(targets) => self.set_targets(targets),
                        Msg::Event(Ok(event)) => self.event(&event),
                        Msg::Event(Err(error)) => {
                            tracing::warn!(%error, "source watcher error");
                        }
                    }
                }
            }
            self.fire_due(Instant::now());
        }
    }

    fn set_targets(&mut self, targets: Vec<DevTarget>) {
        let mut wanted: BTreeMap<Key, DevTarget> =
            targets.into_iter().map(|t| (t.key.clone(), t)).collect();
        let keys: Vec<Key> = self.trees.keys().cloned().collect();
        for key in keys {
            let keep = wanted.get(&key).is_some_and(|t| {
                let w = &self.trees[&key];
                // A root that appeared or vanished is walked again.
                *t == w.target && w.rooted == w.tree.root.is_dir()
            });
            if keep {
                wanted.remove(&key);
            } else if let Some(mut old) = self.trees.remove(&key) {
                for dir in old.tree.release_all() {
                    disarm(&mut self.notify, &mut self.armed, &dir);
                }
                if !wanted.contains_key(&key) {
                    self.sources.update(&key, |s| {
                        s.watching = false;
                        s.message = None;
                        s.files = 0;
                    });
                    let _ = self.out.send(key);
                }
            }
        }
        for (key, target) in wanted {
            self.add(key, target);
        }
    }

    /// Walks a new target's tree (its files as they are are the baseline).
    fn add(&mut self, key: Key, target: DevTarget) {
        let mut tree = Tree::new(target.root.clone(), &target.globs);
        let root = target.root.clone();
        let rooted = root.is_dir();
        let (watching, message) = if let Some(error) = self.notifier().err() {
            (false, Some(error))
        } else if rooted {
            let mut failed = None;
            {
                let (notify, armed) = (&mut self.notify, &mut self.armed);
                tree.walk(&root, true, &mut |dir| {
                    if let Err(e) = arm(notify, armed, dir) {
                        failed.get_or_insert(e);
                    }
                });
            }
            match failed {
                None => (true, None),
                Some(error) => (false, Some(error)),
            }
        } else {
            (
                false,
                Some(format!(
                    "dev.cwd {} is not a directory; looked for again at the next reload or resync",
                    root.display()
                )),
            )
        };
        let files = tree.file_count() as u64;
        tracing::info!(server = %key, root = %root.display(), globs = ?target.globs, files, watching, "watching the server's source");
        self.sources.update(&key, |s| {
            s.watching = watching;
            s.message = message;
            s.files = files;
        });
        let _ = self.out.send(key.clone());
        self.trees.insert(
            key,
            Watched {
                target,
                tree,
                debounce: Debounce::new(false),
                rooted,
            },
        );
    }

    /// The notify watcher, made on first use.
    fn notifier(&mut self) -> Result<(), String> {
        if self.notify.is_some() {
            return Ok(());
        }
        let events = self.events.clone();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if let Ok(event) = &event
                && (event.kind.is_access()
                    || event.kind == EventKind::Modify(ModifyKind::Name(RenameMode::Both)))
            {
                return;
            }
            let _ = events.send(Msg::Event(event));
        })
        .map_err(|e| format!("cannot start the file watcher: {e}"))?;
        self.notify = Some(watcher);
        Ok(())
    }

    fn event(&mut self, event: &notify::Event) {
        let now = Instant::now();
        let rescan = event.need_rescan();
        let (notify, armed) = (&mut self.notify, &mut self.armed);
        for watched in self.trees.values_mut() {
            let touched = {
                let mut arm_new = |dir: &Path| {
                    if let Err(error) = arm(notify, armed, dir) {
                        tracing::warn!(%error, "could not watch a source directory");
                    }
                };
                if rescan {
                    watched.tree.touch_all(&mut arm_new);
                    true
                } else {
                    let mut any = false;
                    for path in &event.paths {
                        any |= watched.tree.touch(path, &mut arm_new);
                    }
                    any
                }
            };
            for dir in watched.tree.take_released() {
                disarm(notify, armed, &dir);
            }
            if touched && watched.debounce.event(now, self.window) {
                watched.debounce.unjudged(now, self.window);
            }
        }
    }

    /// Judges the servers whose files have been quiet for the window.
    fn fire_due(&mut self, now: Instant) {
        for (key, watched) in &mut self.trees {
            if !watched.debounce.quiet(now) {
                continue;
            }
            let changed = watched.tree.judge();
            let files = watched.tree.file_count() as u64;
            if changed.is_empty() {
                self.sources.update(key, |s| s.files = files);
                continue;
            }
            let _ = watched.debounce.trailing(Verdict::Valid);
            tracing::info!(server = %key, changed = ?changed, "the server's source changed");
            self.sources.update(key, |s| {
                s.generation += 1;
                s.changed_count = changed.len();
                s.changed = changed.into_iter().take(CHANGED_SHOWN).collect();
                s.files = files;
            });
            let _ = self.out.send(key.clone());
        }
    }
}

/// Watches `dir` (once, however many trees need it).
fn arm(
    notify: &mut Option<notify::RecommendedWatcher>,
    armed: &mut HashMap<PathBuf, usize>,
    dir: &Path,
) -> Result<(), String> {
    if let Some(count) = armed.get_mut(dir) {
        *count += 1;
        return Ok(());
    }
    let Some(notify) = notify else {
        return Err("the file watcher is not running".to_owned());
    };
    match notify.watch(dir, RecursiveMode::NonRecursive) {
        Ok(()) => {
            armed.insert(dir.to_path_buf(), 1);
            Ok(())
        }
        Err(error) => Err(format!("cannot watch {}: {error}", dir.display())),
    }
}

fn disarm(
    notify: &mut Option<notify::RecommendedWatcher>,
    armed: &mut HashMap<PathBuf, usize>,
    dir: &Path,
) {
    if let Some(count) = armed.get_mut(dir) {
        *count -= 1;
        if *count == 0 {
            armed.remove(dir);
            // notify drops the watch of a deleted directory itself.
            if let Some(notify) = notify {
                let _ = notify.unwatch(dir);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use tokio::time::timeout;

    use super::*;

    const WINDOW: Duration = Duration::from_millis(150);
    /// Longer than a trailing emission can take to come.
    const QUIET: Duration = Duration::from_millis(700);
    const DEADLINE: Duration = Duration::from_secs(10);

    struct Rig {
        watcher: DevWatcher,
        keys: UnboundedReceiver<Key>,
        key: Key,
    }

    impl Rig {
        fn start(root: &Path, globs: &[&str]) -> Rig {
            let (watcher, keys) = DevWatcher::start(WINDOW).unwrap();
            let key = Key::mcp("srv");
            watcher.set_targets(vec![DevTarget {
                key: key.clone(),
                root: root.to_path_buf(),
                globs: globs.iter().map(|g| (*g).to_owned()).collect(),
            }]);
            Rig { watcher, keys, key }
        }

        fn state(&self) -> CodeState {
            self.watcher.sources().get(&self.key).unwrap_or_default()
        }

        /// Until the state satisfies `pred`.
        async fn until(&mut self, what: &str, pred: impl Fn(&CodeState) -> bool) -> CodeState {
            let result = timeout(DEADLINE, async {
                loop {
                    let state = self.state();
                    if pred(&state) {
                        return state;
                    }
                    self.keys.recv().await.expect("the watcher runs");
                }
            })
            .await;
            result.unwrap_or_else(|_| panic!("{what}: {:?}", self.state()))
        }

        /// Whatever comes until nothing has for `QUIET`.
        async fn settle(&mut self) {
            while let Ok(Some(_)) = timeout(QUIET, self.keys.recv()).await {}
        }
    }

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[tokio::test]
    async fn a_burst_of_saves_is_one_change_and_ignored_files_are_none() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        write(&root.join("src/server.py"), "v0");
        write(&root.join("node_modules/x/index.py"), "n0");
        let mut rig = Rig::start(&root, &["**/*.py"]);
        let armed = rig.until("watching", |s| s.watching).await;
        assert_eq!(armed.files, 1);

        for n in 1..=5 {
            write(&root.join("src/server.py"), &format!("v{n}"));
            std::thread::sleep(Duration::from_millis(20));
        }
        let state = rig.until("one change", |s| s.generation >= 1).await;
        assert_eq!(state.changed, ["src/server.py"]);
        rig.settle().await;
        assert_eq!(rig.state().generation, 1, "a burst is one change");

        // Outside the globs, under node_modules, a same-bytes rewrite: none.
        write(&root.join("notes.txt"), "x");
        write(&root.join("node_modules/x/index.py"), "n1");
        write(&root.join("src/server.py"), "v5");
        // A positive control after them: only it counts.
        write(&root.join("src/new.py"), "new");
        let state = rig.until("the control", |s| s.generation >= 2).await;
        assert_eq!(state.changed, ["src/new.py"]);
        rig.settle().await;
        assert_eq!(rig.state().generation, 2);
    }

    #[tokio::test]
    async fn a_missing_root_is_not_watching_and_found_again_when_targets_are_set() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap().join("later");
        let mut rig = Rig::start(&root, &["*.js"]);
        let state = rig.until("reported", |s| s.message.is_some()).await;
        assert!(!state.watching);
        write(&root.join("a.js"), "a");
        rig.watcher.set_targets(vec![DevTarget {
            key: rig.key.clone(),
            root: root.clone(),
            globs: vec!["*.js".to_owned()],
        }]);
        let state = rig.until("watching", |s| s.watching).await;
        assert_eq!(state.files, 1);
        rig.watcher.set_targets(Vec::new());
        rig.until("no longer watching", |s| !s.watching).await;
    }
}

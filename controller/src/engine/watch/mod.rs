//! Watching the source files: which one changed, and when its content is
//! settled enough to be read.
//!
//! This module owns the step *file system → "this source changed"*. It
//! watches the **parent directory** of every source, non-recursively, and
//! matches exact paths, so `.mcp.json.swp` or `x.mcp.json` never count. A
//! parent that does not exist yet is covered by its nearest existing
//! ancestor; the watch moves down as directories appear and back up when
//! they are removed or renamed away. Nothing is ever created on disk.
//!
//! Debounce, per file, with a quiet window `W` (300 ms by default): a
//! leading edge emitted at once when valid, one trailing emission after the
//! file settles, half-written or briefly missing files never reported, and
//! `Absent` news only once ([`debounce`], a pure state machine).
//!
//! The consumer compares canonical parsed content, so an emission for a
//! formatting-only save is harmless: the promise is that the last state of a
//! file is never missed and a half-written file is never reported. Start the
//! watcher (or [`Watcher::set_files`]) *before* reading the files: every
//! change after the call returns is reported, none before it.
//!
//! Cost: one thread (`steward-watch`) next to notify's own. It blocks on a
//! channel and arms a timeout only while some file is settling, so an idle
//! watcher uses no CPU. `Access` events (our own reads among them) are
//! dropped in notify's callback and never wake it. Dropping the [`Watcher`]
//! stops both threads.
//!
//! **Symlinks.** A watched file that is a symlink (a dotfile manager's
//! `~/.qwen/settings.json` → a repository) is watched as a link *and*
//! through it: the directory of every link hop and of the final target is
//! watched too, and an event on any of them counts as an event on the file.
//! A retargeted link is a change; the watches then follow the new target.
//!
//! Limits: a rename of a directory *above* the watched one goes unseen (its
//! watch keeps following the moved inode until an event there re-arms it;
//! the controller's periodic resync catches what was missed).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher as _};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

mod debounce;
pub mod dev;
pub mod pinned;
mod tree;

use debounce::Debounce;

/// The default quiet window (`--debounce-ms`).
pub const DEFAULT_WINDOW: Duration = Duration::from_millis(300);

/// How many times a re-arm looks again when directories appear or vanish
/// between the `stat` that chose a directory and the watch on it.
const ARM_ROUNDS: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchConfig {
    /// How long a file must go without events to count as settled.
    pub window: Duration,
}

impl Default for WatchConfig {
    fn default() -> Self {
        Self {
            window: DEFAULT_WINDOW,
        }
    }
}

/// What a [`Judge`] says of a file's current content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Reads, parses and validates: good enough to apply at once.
    Valid,
    /// Unreadable, unparsable or invalid (perhaps only half-written).
    Invalid,
    /// The file does not exist: a valid, empty source.
    Absent,
}

/// Decides whether a file's content is good enough to apply at once: reads,
/// parses and validates it. It must answer [`Verdict::Absent`] when the file
/// is not found, including when it vanishes between the event and the read.
/// Called on the watcher's thread, so it may block on I/O.
pub type Judge = Arc<dyn Fn(&Path) -> Verdict + Send + Sync>;

/// A settled change of one watched file, with the verdict on its content at
/// the moment it was emitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub path: PathBuf,
    pub verdict: Verdict,
}

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("watch {path}: not an absolute file path without `..`")]
    InvalidPath { path: PathBuf },
    #[error("start the file watcher: {0}")]
    Init(#[source] notify::Error),
    #[error("watch the directory {path}: {source}")]
    Watch {
        path: PathBuf,
        source: notify::Error,
    },
    #[error("spawn the file watcher thread: {0}")]
    Spawn(#[source] std::io::Error),
    #[error("reach the file watcher: it has stopped")]
    Stopped,
}

/// A running watch over a set of files. Dropping it stops the watch and
/// closes the change channel.
#[derive(Debug)]
pub struct Watcher {
    tx: mpsc::Sender<Msg>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Starts watching `files` (absolute paths; their parent directories may
    /// not exist yet). Changes arrive on the returned channel; nothing is
    /// emitted for the files' state at start. The watches are in place when
    /// this returns.
    pub fn start(
        files: Vec<PathBuf>,
        config: WatchConfig,
        judge: Judge,
    ) -> Result<(Watcher, UnboundedReceiver<FileChange>), WatchError> {
        let files = normalize_all(files)?;
        let (tx, rx) = mpsc::channel();
        let events = tx.clone();
        let notify = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if let Ok(event) = &event {
                // Access: opens and closes, our own reads among them.
                // Rename `Both`: inotify already sent its `From` and `To`.
                if event.kind.is_access()
                    || event.kind == EventKind::Modify(ModifyKind::Name(RenameMode::Both))
                {
                    return;
                }
            }
            // The receiver is gone only once the watcher is shutting down.
            let _ = events.send(Msg::Event(event));
        })
        .map_err(WatchError::Init)?;
        let (out, changes) = unbounded_channel();
        let mut core = Core {
            notify,
            judge,
            window: config.window,
            out,
            files: BTreeMap::new(),
            aliases: BTreeMap::new(),
            ancestors: HashSet::new(),
            armed: BTreeSet::new(),
        };
        core.replace_files(files);
        core.rearm(&mut HashSet::new()).1?;
        let thread = std::thread::Builder::new()
            .name("steward-watch".into())
            .spawn(move || core.run(rx))
            .map_err(WatchError::Spawn)?;
        Ok((
            Watcher {
                tx,
                thread: Some(thread),
            },
            changes,
        ))
    }

    /// Replaces the watched set (e.g. after the extensions were re-read).
    /// Paths that stay keep their debounce state; added paths emit nothing
    /// for their current state; pending changes of removed paths are
    /// dropped. On a watch error the new set is kept and the failed
    /// directory is tried again at the next re-arm.
    #[cfg(test)]
    pub fn set_files(&self, files: Vec<PathBuf>) -> Result<(), WatchError> {
        let files = normalize_all(files)?;
        let (reply, answer) = mpsc::channel();
        self.tx
            .send(Msg::SetFiles(files, reply))
            .map_err(|_| WatchError::Stopped)?;
        answer.recv().map_err(|_| WatchError::Stopped)?
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Shutdown);
        if let Some(thread) = self.thread.take() {
            // Waits at most for the judge call in progress.
            let _ = thread.join();
        }
    }
}

enum Msg {
    Event(notify::Result<notify::Event>),
    #[cfg(test)]
    SetFiles(Vec<PathBuf>, mpsc::Sender<Result<(), WatchError>>),
    Shutdown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

/// Which directory's watch covers a file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Arm {
    /// Just added: its state at arming time is the caller's to read.
    New,
    /// No watch covers it (the watch failed); the next re-arm retries.
    Unarmed,
    /// Covered by this directory: its parent, or the nearest existing ancestor.
    Dir(PathBuf),
}

struct FileState {
    arm: Arm,
    debounce: Debounce,
}

/// The watcher thread's state.
struct Core {
    notify: notify::RecommendedWatcher,
    judge: Judge,
    window: Duration,
    out: UnboundedSender<FileChange>,
    files: BTreeMap<PathBuf, FileState>,
    /// Where watched files that are symlinks lead: every link hop and the
    /// final target, each with the files that resolve through it. An event
    /// on one is an event on those files (an edit of the target, a
    /// retargeted intermediate link).
    aliases: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
    /// Every proper ancestor of a watched file or alias: an event on one of
    /// them may mean a watch has to move.
    ancestors: HashSet<PathBuf>,
    /// The directories watched now.
    armed: BTreeSet<PathBuf>,
}

impl Core {
    fn run(mut self, rx: mpsc::Receiver<Msg>) {
        loop {
            let first = match self.next_deadline() {
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
                // One save makes several events that arrive together: take
                // all that are queued so that they share one judge call.
                let batch: Vec<Msg> = std::iter::once(first).chain(rx.try_iter()).collect();
                if self.handle(batch) == Flow::Stop {
                    return;
                }
            }
            if self.fire_due(Instant::now()) == Flow::Stop {
                return;
            }
        }
    }

    fn handle(&mut self, batch: Vec<Msg>) -> Flow {
        let mut touched = BTreeSet::new();
        let mut stale = HashSet::new();
        let mut rearm = false;
        for msg in batch {
            match msg {
                Msg::Shutdown => return Flow::Stop,
                Msg::Event(Ok(event)) => {
                    tracing::trace!(?event, "file event");
                    rearm |= self.note(&event, &mut touched, &mut stale);
                }
                Msg::Event(Err(error)) => tracing::warn!(%error, "file watcher error"),
                #[cfg(test)]
                Msg::SetFiles(files, reply) => {
                    self.replace_files(files);
                    let (moved, result) = self.rearm(&mut stale);
                    touched.extend(moved);
                    rearm = false;
                    let _ = reply.send(result);
                }
            }
        }
        if rearm {
            let (moved, _) = self.rearm(&mut stale);
            touched.extend(moved);
        }
        let now = Instant::now();
        for file in touched {
            if self.touch(&file, now) == Flow::Stop {
                return Flow::Stop;
            }
        }
        Flow::Continue
    }

    /// Records what one event means: files to touch, watches gone stale.
    /// Returns whether the watches must be re-armed.
    fn note(
        &self,
        event: &notify::Event,
        touched: &mut BTreeSet<PathBuf>,
        stale: &mut HashSet<PathBuf>,
    ) -> bool {
        if event.need_rescan() {
            // Events were lost: renew every watch and look at every file.
            stale.extend(self.armed.iter().cloned());
            touched.extend(self.files.keys().cloned());
            return true;
        }
        // Kinds that can take a directory away from its inode's watch.
        let moves = matches!(
            event.kind,
            EventKind::Create(_)
                | EventKind::Remove(_)
                | EventKind::Modify(ModifyKind::Name(_))
                | EventKind::Any
                | EventKind::Other
        );
        let mut rearm = false;
        for path in &event.paths {
            if self.files.contains_key(path) {
                touched.insert(path.clone());
                // A link created, removed or retargeted: follow it anew.
                rearm |= path.is_symlink() || self.aliases.values().any(|f| f.contains(path));
            }
            if let Some(files) = self.aliases.get(path) {
                touched.extend(files.iter().cloned());
                rearm = true;
            }
            rearm |= self.ancestors.contains(path);
            if moves {
                // A watched directory (or one above it) was removed, renamed
                // or re-created: its watch follows the old inode, or nothing.
                for dir in self.armed.iter().filter(|dir| dir.starts_with(path)) {
                    stale.insert(dir.clone());
                    rearm = true;
                }
            }
        }
        rearm
    }

    /// Installs a new file set, keeping the state of paths that stay.
    fn replace_files(&mut self, files: Vec<PathBuf>) {
        let mut old = std::mem::take(&mut self.files);
        for file in files {
            let state = old.remove(&file).unwrap_or(FileState {
                arm: Arm::New,
                debounce: Debounce::new(false),
            });
            self.files.insert(file, state);
        }
        self.follow_links();
    }

    /// Recomputes [`Core::aliases`] from the links as they are now, and the
    /// ancestors of everything watched.
    fn follow_links(&mut self) {
        self.aliases.clear();
        for file in self.files.keys() {
            for hop in link_hops(file) {
                self.aliases.entry(hop).or_default().insert(file.clone());
            }
        }
        self.ancestors = self
            .files
            .keys()
            .chain(self.aliases.keys())
            .flat_map(|path| path.ancestors().skip(1).map(Path::to_path_buf))
            .collect();
    }

    /// Moves the watches to where the files' nearest existing directories
    /// are now, renewing `stale` ones. Returns the files whose covering
    /// watch moved or was renewed (they may have changed unseen), and the
    /// first watch error.
    fn rearm(&mut self, stale: &mut HashSet<PathBuf>) -> (Vec<PathBuf>, Result<(), WatchError>) {
        for dir in stale.drain() {
            if self.armed.remove(&dir) {
                // notify drops the watch of a deleted directory itself.
                let _ = self.notify.unwatch(&dir);
            }
        }
        self.follow_links();
        let mut fresh = HashSet::new();
        let mut error = None;
        let mut wanted = self.wanted();
        let mut settled = false;
        for _ in 0..ARM_ROUNDS {
            let needed: BTreeSet<&PathBuf> = wanted.values().flatten().collect();
            let unneeded: Vec<PathBuf> = self
                .armed
                .iter()
                .filter(|dir| !needed.contains(dir))
                .cloned()
                .collect();
            for dir in unneeded {
                self.armed.remove(&dir);
                let _ = self.notify.unwatch(&dir);
            }
            for dir in needed {
                if self.armed.contains(dir) {
                    continue;
                }
                match self.notify.watch(dir, RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        self.armed.insert(dir.clone());
                        fresh.insert(dir.clone());
                    }
                    // Gone since the stat: the next round looks higher up.
                    Err(e) if vanished(&e) => {}
                    Err(source) => {
                        tracing::warn!(dir = %dir.display(), error = %source, "could not watch a directory");
                        error.get_or_insert(WatchError::Watch {
                            path: dir.clone(),
                            source,
                        });
                    }
                }
            }
            // A directory that appeared between the stat and the watch made
            // no event we can see: look again until the picture holds still.
            let again = self.wanted();
            if again == wanted {
                settled = true;
                break;
            }
            wanted = again;
        }
        if !settled {
            tracing::warn!(
                "directories kept changing while being watched; retrying at the next event"
            );
        }
        let mut moved = Vec::new();
        // A link target whose directory is watched only from now on may
        // have changed unseen.
        for (alias, files) in &self.aliases {
            if let Some(Some(dir)) = wanted.get(alias)
                && fresh.contains(dir)
            {
                moved.extend(
                    files
                        .iter()
                        .filter(|f| self.files.get(*f).is_some_and(|s| s.arm != Arm::New))
                        .cloned(),
                );
            }
        }
        for (file, state) in &mut self.files {
            let arm = match wanted.remove(file).flatten() {
                Some(dir) if self.armed.contains(&dir) => Arm::Dir(dir),
                _ => Arm::Unarmed,
            };
            match (&state.arm, &arm) {
                // Known only from now on: stat it after its watch is in place,
                // so a creation in between is seen by one or the other.
                (Arm::New, _) => state
                    .debounce
                    .set_absent(matches!(file.try_exists(), Ok(false))),
                (old, Arm::Dir(dir)) if *old != arm || fresh.contains(dir) => {
                    moved.push(file.clone());
                }
                _ => {}
            }
            state.arm = arm;
        }
        (moved, error.map_or(Ok(()), Err))
    }

    /// The directory that should cover each file and each alias now.
    fn wanted(&self) -> BTreeMap<PathBuf, Option<PathBuf>> {
        self.files
            .keys()
            .chain(self.aliases.keys())
            .map(|path| (path.clone(), nearest_dir(path)))
            .collect()
    }

    /// An event for `file` at `now`.
    fn touch(&mut self, file: &Path, now: Instant) -> Flow {
        let Some(state) = self.files.get_mut(file) else {
            return Flow::Continue;
        };
        if !state.debounce.event(now, self.window) {
            return Flow::Continue;
        }
        let verdict = (self.judge)(file);
        match state.debounce.leading(now, self.window, verdict) {
            Some(verdict) => self.emit(file, verdict),
            None => Flow::Continue,
        }
    }

    /// Ends the settling of every file quiet by `now`.
    fn fire_due(&mut self, now: Instant) -> Flow {
        let due: Vec<PathBuf> = self
            .files
            .iter_mut()
            .filter_map(|(file, state)| state.debounce.quiet(now).then(|| file.clone()))
            .collect();
        for file in due {
            let verdict = (self.judge)(&file);
            let Some(state) = self.files.get_mut(&file) else {
                continue;
            };
            if let Some(verdict) = state.debounce.trailing(verdict)
                && self.emit(&file, verdict) == Flow::Stop
            {
                return Flow::Stop;
            }
        }
        Flow::Continue
    }

    fn emit(&mut self, file: &Path, verdict: Verdict) -> Flow {
        tracing::debug!(path = %file.display(), ?verdict, "source file changed");
        let change = FileChange {
            path: file.to_path_buf(),
            verdict,
        };
        // Nobody listens any more: nothing left to do.
        match self.out.send(change) {
            Ok(()) => Flow::Continue,
            Err(_) => Flow::Stop,
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.files
            .values()
            .filter_map(|state| state.debounce.deadline())
            .min()
    }
}

/// The directory whose watch covers `file`: its parent if that exists, else
/// the nearest existing ancestor.
fn nearest_dir(file: &Path) -> Option<PathBuf> {
    file.ancestors()
        .skip(1)
        .find(|dir| dir.is_dir())
        .map(Path::to_path_buf)
}

/// Where `file` leads if it is a symlink: each link it goes through after
/// itself and the final target (which may not exist), as absolute paths
/// whose directories are resolved. Empty for a file that is not a link.
fn link_hops(file: &Path) -> Vec<PathBuf> {
    // As the kernel's limit on nested links (ELOOP).
    const MAX_HOPS: usize = 40;
    let mut hops = Vec::new();
    let mut current = file.to_path_buf();
    while hops.len() < MAX_HOPS {
        let Ok(target) = std::fs::read_link(&current) else {
            break;
        };
        let joined = match current.parent() {
            Some(dir) => dir.join(target),
            None => target,
        };
        let Some(next) = resolve_dir_of(&joined) else {
            break;
        };
        if next == *file || hops.contains(&next) {
            break;
        }
        hops.push(next.clone());
        current = next;
    }
    hops
}

/// `path` with its directory canonicalized (links and `..` resolved) and
/// its own name kept: the path events under that directory carry. The
/// nearest existing ancestor is resolved when the directory is missing.
fn resolve_dir_of(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?;
    let dir = path.parent()?;
    if let Ok(dir) = std::fs::canonicalize(dir) {
        return Some(dir.join(name));
    }
    // Missing directories: resolve what exists, keep the rest as written.
    let mut rest = Vec::new();
    let mut base = dir;
    loop {
        rest.push(base.file_name()?);
        base = base.parent()?;
        if let Ok(resolved) = std::fs::canonicalize(base) {
            let mut out = resolved;
            out.extend(rest.iter().rev());
            out.push(name);
            return normalize(out).ok();
        }
    }
}

/// The directory disappeared between choosing it and watching it.
fn vanished(error: &notify::Error) -> bool {
    match &error.kind {
        notify::ErrorKind::PathNotFound => true,
        notify::ErrorKind::Io(io) => io.kind() == std::io::ErrorKind::NotFound,
        _ => false,
    }
}

/// Checks that `path` is an absolute file path without `..` and drops `.`
/// components and trailing slashes, so it compares equal to event paths.
fn normalize(path: PathBuf) -> Result<PathBuf, WatchError> {
    let ok = path.is_absolute()
        && path.file_name().is_some()
        && !path.components().any(|c| c == Component::ParentDir);
    if !ok {
        return Err(WatchError::InvalidPath { path });
    }
    Ok(path.components().collect())
}

fn normalize_all(files: Vec<PathBuf>) -> Result<Vec<PathBuf>, WatchError> {
    files.into_iter().map(normalize).collect()
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::io::{self, Write};
    use std::sync::Mutex;

    use tokio::time::timeout;

    use super::*;

    const WINDOW: Duration = Duration::from_millis(200);
    /// Longer than any trailing emission of the last event can take to come.
    const QUIET: Duration = Duration::from_millis(800);
    /// Bound on an expected emission (a loaded 2-core machine).
    const DEADLINE: Duration = Duration::from_secs(10);

    type Log = Arc<Mutex<Vec<PathBuf>>>;

    /// Valid if the file parses as JSON, absent if missing; logs its calls.
    fn json_judge(log: Log) -> Judge {
        Arc::new(move |path: &Path| {
            log.lock().unwrap().push(path.to_path_buf());
            match fs::read(path) {
                Ok(bytes) if serde_json::from_slice::<serde_json::Value>(&bytes).is_ok() => {
                    Verdict::Valid
                }
                Ok(_) => Verdict::Invalid,
                Err(e) if e.kind() == io::ErrorKind::NotFound => Verdict::Absent,
                Err(_) => Verdict::Invalid,
            }
        })
    }

    struct Rig {
        watcher: Watcher,
        rx: UnboundedReceiver<FileChange>,
        judged: Log,
    }

    impl Rig {
        fn start(files: &[PathBuf], window: Duration) -> Rig {
            let judged = Log::default();
            let (watcher, rx) = Watcher::start(
                files.to_vec(),
                WatchConfig { window },
                json_judge(judged.clone()),
            )
            .expect("start the watcher");
            Rig {
                watcher,
                rx,
                judged,
            }
        }

        /// The next emission.
        async fn next(&mut self) -> FileChange {
            timeout(DEADLINE, self.rx.recv())
                .await
                .expect("a change within the deadline")
                .expect("the channel stays open")
        }

        /// Receives until `path` is reported as `verdict`; returns what came
        /// before it.
        async fn wait_for(&mut self, path: &Path, verdict: Verdict) -> Vec<FileChange> {
            let mut before = Vec::new();
            loop {
                let change = self.next().await;
                if change.path == path && change.verdict == verdict {
                    return before;
                }
                before.push(change);
            }
        }

        /// Everything emitted until nothing has come for `QUIET`. Only
        /// meaningful after a positive control was received.
        async fn quiet(&mut self) -> Vec<FileChange> {
            let mut got = Vec::new();
            while let Ok(Some(change)) = timeout(QUIET, self.rx.recv()).await {
                got.push(change);
            }
            got
        }

        fn judged(&self, path: &Path) -> usize {
            self.judged
                .lock()
                .unwrap()
                .iter()
                .filter(|p| *p == path)
                .count()
        }
    }

    fn change(path: &Path, verdict: Verdict) -> FileChange {
        FileChange {
            path: path.to_path_buf(),
            verdict,
        }
    }

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        (dir, root)
    }

    /// Names under `root`, recursively, sorted.
    fn listing(root: &Path) -> Vec<String> {
        fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
            for entry in fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                out.push(path.strip_prefix(root).unwrap().display().to_string());
                if path.is_dir() {
                    walk(&path, root, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(root, root, &mut out);
        out.sort();
        out
    }

    /// Writes `content` next to `path` and renames it over `path`, as
    /// editors that save atomically do.
    fn save_by_rename(path: &Path, content: &str) {
        let tmp = path.with_extension("json.tmp~");
        fs::write(&tmp, content).unwrap();
        fs::rename(&tmp, path).unwrap();
    }

    fn verdicts(changes: &[FileChange], path: &Path) -> Vec<Verdict> {
        changes
            .iter()
            .filter(|c| c.path == path)
            .map(|c| c.verdict)
            .collect()
    }

    #[tokio::test]
    async fn never_creates_the_watched_files_or_missing_directories() {
        let (_dir, root) = workspace();
        let control = root.join(".lsp.json");
        let files = [
            root.join(".mcp.json"),
            root.join(".qwen/settings.json"),
            root.join("extensions/foo/a/b/qwen-extension.json"),
            control.clone(),
        ];
        let mut rig = Rig::start(&files, WINDOW);
        assert!(listing(&root).is_empty());

        fs::write(&control, "{}").unwrap();
        assert_eq!(rig.wait_for(&control, Verdict::Valid).await, []);
        rig.quiet().await;
        drop(rig);
        assert_eq!(listing(&root), [".lsp.json"]);
    }

    #[tokio::test]
    async fn detects_create_modify_and_delete() {
        let (_dir, root) = workspace();
        let file = root.join(".mcp.json");
        let mut rig = Rig::start(std::slice::from_ref(&file), WINDOW);

        fs::write(&file, r#"{"mcpServers": {}}"#).unwrap();
        assert_eq!(rig.next().await, change(&file, Verdict::Valid));
        assert!(
            verdicts(&rig.quiet().await, &file)
                .iter()
                .all(|v| *v == Verdict::Valid)
        );

        fs::write(&file, r#"{"mcpServers": {"a": {"command": "x"}}}"#).unwrap();
        assert_eq!(rig.next().await, change(&file, Verdict::Valid));
        assert!(
            verdicts(&rig.quiet().await, &file)
                .iter()
                .all(|v| *v == Verdict::Valid)
        );

        fs::remove_file(&file).unwrap();
        let before = rig.wait_for(&file, Verdict::Absent).await;
        assert!(
            before.iter().all(|c| c.verdict == Verdict::Valid),
            "{before:?}"
        );
        assert_eq!(rig.quiet().await, []);
    }

    #[tokio::test]
    async fn ignores_unrelated_files_in_the_same_directory() {
        let (_dir, root) = workspace();
        let file = root.join(".mcp.json");
        let control = root.join(".lsp.json");
        let mut rig = Rig::start(&[file.clone(), control.clone()], WINDOW);

        for name in [
            ".mcp.json.swp",
            "other.json",
            "x.mcp.json",
            ".mcp.json~",
            ".MCP.JSON",
        ] {
            fs::write(root.join(name), "{}").unwrap();
        }
        fs::create_dir(root.join(".mcp.jsonx")).unwrap();
        fs::write(&control, "{}").unwrap();

        // Events are handled in order: a match on the unrelated files would
        // have been emitted (or judged) before the control file.
        assert_eq!(rig.next().await, change(&control, Verdict::Valid));
        assert!(rig.quiet().await.iter().all(|c| c.path == control));
        assert_eq!(rig.judged(&file), 0);
        assert!(!file.exists());
    }

    #[tokio::test]
    async fn save_by_rename_is_one_change() {
        let (_dir, root) = workspace();
        let file = root.join(".mcp.json");
        fs::write(&file, r#"{"a": 1}"#).unwrap();
        let mut rig = Rig::start(std::slice::from_ref(&file), WINDOW);

        save_by_rename(&file, r#"{"a": 2}"#);
        assert_eq!(rig.next().await, change(&file, Verdict::Valid));
        // Nothing happened after the leading emission: no trailing one, and
        // our own read of the file did not count as an event.
        assert_eq!(rig.quiet().await, []);
        assert_eq!(rig.judged(&file), 1);
    }

    #[tokio::test]
    async fn renaming_the_file_away_reports_absent_and_back_reports_valid() {
        let (_dir, root) = workspace();
        let file = root.join(".mcp.json");
        let aside = root.join(".mcp.json.bak");
        fs::write(&file, "{}").unwrap();
        let mut rig = Rig::start(std::slice::from_ref(&file), WINDOW);

        fs::rename(&file, &aside).unwrap();
        assert_eq!(rig.next().await, change(&file, Verdict::Absent));
        assert_eq!(rig.quiet().await, []);
        fs::rename(&aside, &file).unwrap();
        assert_eq!(rig.next().await, change(&file, Verdict::Valid));
    }

    /// Writes `content` to `path` in some editor's way.
    type Save = fn(&Path, &str);

    /// Saves that remove the file for a moment, as editors do them, with
    /// the editor's own work between the steps (long enough for the events
    /// of the removal to be handled on their own).
    fn momentary_removal_saves() -> [(&'static str, Save); 3] {
        fn editor_pause() {
            std::thread::sleep(Duration::from_millis(50));
        }
        fn beside(path: &Path, suffix: &str) -> PathBuf {
            let mut name = path.file_name().unwrap().to_os_string();
            name.push(suffix);
            path.with_file_name(name)
        }
        fn jetbrains_safe_write(path: &Path, content: &str) {
            let (tmp, old) = (beside(path, "___jb_tmp___"), beside(path, "___jb_old___"));
            fs::write(&tmp, content).unwrap();
            fs::rename(path, &old).unwrap();
            editor_pause();
            fs::rename(&tmp, path).unwrap();
            fs::remove_file(&old).unwrap();
        }
        fn emacs_backup_by_rename(path: &Path, content: &str) {
            fs::rename(path, beside(path, "~")).unwrap();
            editor_pause();
            fs::write(path, content).unwrap();
        }
        fn remove_then_write(path: &Path, content: &str) {
            fs::remove_file(path).unwrap();
            editor_pause();
            fs::write(path, content).unwrap();
        }
        [
            ("JetBrains safe-write", jetbrains_safe_write),
            ("Emacs backup-by-rename", emacs_backup_by_rename),
            ("rm + write", remove_then_write),
        ]
    }

    #[tokio::test]
    async fn saves_that_remove_the_file_for_a_moment_never_report_it_absent() {
        for (style, save) in momentary_removal_saves() {
            let (_dir, root) = workspace();
            let file = root.join(".mcp.json");
            fs::write(&file, r#"{"a": 1}"#).unwrap();
            let mut rig = Rig::start(std::slice::from_ref(&file), WINDOW);

            save(&file, r#"{"a": 2}"#);
            let mut got = vec![rig.next().await];
            got.extend(rig.quiet().await);
            assert!(
                got.iter().all(|c| *c == change(&file, Verdict::Valid)),
                "{style}: {got:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_deleted_file_is_reported_absent_only_after_the_quiet_window() {
        let (_dir, root) = workspace();
        let file = root.join(".mcp.json");
        fs::write(&file, "{}").unwrap();
        let window = Duration::from_millis(500);
        let mut rig = Rig::start(std::slice::from_ref(&file), window);

        let removed = Instant::now();
        fs::remove_file(&file).unwrap();
        assert_eq!(rig.next().await, change(&file, Verdict::Absent));
        assert!(removed.elapsed() >= window, "{:?}", removed.elapsed());
        assert_eq!(rig.quiet().await, []);
    }

    /// Points `link` at `target`, replacing it atomically (`ln -sfn`).
    fn relink(link: &Path, target: &Path) {
        let tmp = link.with_extension("json.tmp~");
        std::os::unix::fs::symlink(target, &tmp).unwrap();
        fs::rename(&tmp, link).unwrap();
    }

    #[tokio::test]
    async fn edits_of_a_symlinked_files_target_are_changes_of_the_file() {
        let (_dir, root) = workspace();
        fs::create_dir_all(root.join("home")).unwrap();
        fs::create_dir_all(root.join("dotfiles/qwen")).unwrap();
        let target = root.join("dotfiles/qwen/settings.json");
        let file = root.join("home/settings.json");
        fs::write(&target, r#"{"a": 1}"#).unwrap();
        // Relative, through `..`, as dotfile managers make them.
        std::os::unix::fs::symlink("../dotfiles/qwen/settings.json", &file).unwrap();
        let mut rig = Rig::start(std::slice::from_ref(&file), WINDOW);

        save_by_rename(&target, r#"{"a": 2}"#);
        assert_eq!(rig.next().await, change(&file, Verdict::Valid));
        rig.quiet().await;
        // In place too.
        fs::write(&target, r#"{"a": 3}"#).unwrap();
        assert_eq!(rig.next().await, change(&file, Verdict::Valid));
        rig.quiet().await;
        // The target deleted: the link dangles, the file is absent.
        fs::remove_file(&target).unwrap();
        assert_eq!(rig.next().await, change(&file, Verdict::Absent));
        fs::write(&target, "{}").unwrap();
        assert_eq!(rig.next().await, change(&file, Verdict::Valid));
    }

    #[tokio::test]
    async fn a_retargeted_link_is_a_change_and_its_new_target_is_followed() {
        let (_dir, root) = workspace();
        for dir in ["a", "b", "home"] {
            fs::create_dir_all(root.join(dir)).unwrap();
        }
        let (old, new) = (root.join("a/settings.json"), root.join("b/settings.json"));
        fs::write(&old, r#"{"v": "a"}"#).unwrap();
        fs::write(&new, r#"{"v": "b"}"#).unwrap();
        let file = root.join("home/settings.json");
        let control = root.join("home/control.json");
        std::os::unix::fs::symlink(&old, &file).unwrap();
        let mut rig = Rig::start(&[file.clone(), control.clone()], WINDOW);

        relink(&file, &new);
        assert_eq!(rig.next().await, change(&file, Verdict::Valid));
        rig.quiet().await;
        save_by_rename(&new, r#"{"v": "b2"}"#);
        assert_eq!(rig.next().await, change(&file, Verdict::Valid));
        rig.quiet().await;
        // The old target is no longer the file's.
        let judged = rig.judged(&file);
        save_by_rename(&old, r#"{"v": "a2"}"#);
        fs::write(&control, "{}").unwrap();
        assert_eq!(rig.next().await, change(&control, Verdict::Valid));
        assert!(rig.quiet().await.iter().all(|c| c.path == control));
        assert_eq!(rig.judged(&file), judged);
    }

    #[tokio::test]
    async fn every_link_of_a_chain_is_followed() {
        let (_dir, root) = workspace();
        for dir in ["home", "links", "a", "b"] {
            fs::create_dir_all(root.join(dir)).unwrap();
        }
        let (a, b) = (root.join("a/s.json"), root.join("b/s.json"));
        fs::write(&a, "{}").unwrap();
        fs::write(&b, "{}").unwrap();
        let middle = root.join("links/s.json");
        let file = root.join("home/settings.json");
        std::os::unix::fs::symlink(&a, &middle).unwrap();
        std::os::unix::fs::symlink(&middle, &file).unwrap();
        let mut rig = Rig::start(std::slice::from_ref(&file), WINDOW);

        save_by_rename(&a, r#"{"x": 1}"#);
        assert_eq!(rig.next().await, change(&file, Verdict::Valid));
        rig.quiet().await;
        relink(&middle, &b);
        assert_eq!(rig.next().await, change(&file, Verdict::Valid));
        rig.quiet().await;
        save_by_rename(&b, r#"{"x": 2}"#);
        assert_eq!(rig.next().await, change(&file, Verdict::Valid));
    }

    #[tokio::test]
    async fn delete_then_create_settles_on_the_new_content() {
        let (_dir, root) = workspace();
        let file = root.join(".mcp.json");
        fs::write(&file, r#"{"a": 1}"#).unwrap();
        let mut rig = Rig::start(std::slice::from_ref(&file), WINDOW);

        fs::remove_file(&file).unwrap();
        fs::write(&file, r#"{"a": 2}"#).unwrap();
        let mut got = vec![rig.next().await];
        got.extend(rig.quiet().await);
        assert!((1..=2).contains(&got.len()), "{got:?}");
        assert_eq!(got.last(), Some(&change(&file, Verdict::Valid)), "{got:?}");
    }

    #[tokio::test]
    async fn truncate_then_write_never_reports_invalid() {
        let (_dir, root) = workspace();
        let file = root.join(".mcp.json");
        fs::write(&file, r#"{"a": 1}"#).unwrap();
        let mut rig = Rig::start(std::slice::from_ref(&file), WINDOW);

        let mut f = fs::File::create(&file).unwrap(); // truncates
        f.flush().unwrap();
        // The writer pauses with the file empty (an invalid JSON document).
        std::thread::sleep(Duration::from_millis(50));
        f.write_all(br#"{"a": 2}"#).unwrap();
        drop(f);

        let mut got = vec![rig.next().await];
        got.extend(rig.quiet().await);
        assert!(got.iter().all(|c| c.verdict == Verdict::Valid), "{got:?}");
    }

    #[tokio::test]
    async fn a_half_written_then_completed_file_never_reports_invalid() {
        let (_dir, root) = workspace();
        let file = root.join(".mcp.json");
        fs::write(&file, "{}").unwrap();
        let mut rig = Rig::start(std::slice::from_ref(&file), WINDOW);

        let mut f = fs::File::create(&file).unwrap();
        f.write_all(br#"{"mcpServers": {"a": "#).unwrap();
        f.flush().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        f.write_all(br#"{"command": "x"}}}"#).unwrap();
        drop(f);

        let mut got = vec![rig.next().await];
        got.extend(rig.quiet().await);
        assert_eq!(got, [change(&file, Verdict::Valid)]);
        // The half-written content was judged, but not reported.
        assert!(rig.judged(&file) >= 2);
    }

    #[tokio::test]
    async fn invalid_content_is_reported_only_after_the_quiet_window() {
        let (_dir, root) = workspace();
        let file = root.join(".mcp.json");
        fs::write(&file, "{}").unwrap();
        let window = Duration::from_millis(500);
        let mut rig = Rig::start(std::slice::from_ref(&file), window);

        let written = Instant::now();
        save_by_rename(&file, r#"{"mcpServers": "#);
        assert_eq!(rig.next().await, change(&file, Verdict::Invalid));
        assert!(written.elapsed() >= window, "{:?}", written.elapsed());
        assert_eq!(rig.quiet().await, []);
    }

    #[tokio::test]
    async fn the_leading_emission_is_immediate() {
        let (_dir, root) = workspace();
        let files: Vec<PathBuf> = (0..5).map(|i| root.join(format!("f{i}.json"))).collect();
        for file in &files {
            fs::write(file, "{}").unwrap();
        }
        let window = Duration::from_secs(2);
        let mut rig = Rig::start(&files, window);

        let mut latencies = Vec::new();
        for file in &files {
            let written = Instant::now();
            save_by_rename(file, r#"{"a": 1}"#);
            assert_eq!(rig.next().await, change(file, Verdict::Valid));
            latencies.push(written.elapsed());
        }
        eprintln!("leading-edge latency with a 2 s window: {latencies:?}");
        assert!(
            latencies.iter().all(|l| *l < Duration::from_secs(1)),
            "{latencies:?}"
        );
    }

    #[tokio::test]
    async fn a_burst_of_200_writes_emits_at_most_twice() {
        let (_dir, root) = workspace();
        let file = root.join(".mcp.json");
        fs::write(&file, "{}").unwrap();
        let window = Duration::from_millis(300);
        let mut rig = Rig::start(std::slice::from_ref(&file), window);

        for i in 0..200 {
            fs::write(&file, format!(r#"{{"n": {i}}}"#)).unwrap();
        }
        let mut got = vec![rig.next().await];
        got.extend(rig.quiet().await);
        assert!((1..=2).contains(&got.len()), "{got:?}");
        assert!(
            got.iter().all(|c| *c == change(&file, Verdict::Valid)),
            "{got:?}"
        );
    }

    #[tokio::test]
    async fn copying_over_the_file_never_reports_invalid() {
        let (_dir, root) = workspace();
        let file = root.join(".mcp.json");
        let source = root.join("source.json");
        fs::write(&file, "{}").unwrap();
        fs::write(
            &source,
            format!(r#"{{"pad": "{}"}}"#, "x".repeat(256 * 1024)),
        )
        .unwrap();
        let mut rig = Rig::start(std::slice::from_ref(&file), WINDOW);

        fs::copy(&source, &file).unwrap();
        let mut got = vec![rig.next().await];
        got.extend(rig.quiet().await);
        assert!((1..=2).contains(&got.len()), "{got:?}");
        assert!(
            got.iter().all(|c| *c == change(&file, Verdict::Valid)),
            "{got:?}"
        );
    }

    #[tokio::test]
    async fn picks_up_a_parent_directory_created_after_start() {
        let (_dir, root) = workspace();
        let settings = root.join(".qwen/settings.json");
        let control = root.join(".mcp.json");
        let mut rig = Rig::start(&[settings.clone(), control.clone()], WINDOW);

        // An empty directory appearing is no news about the file.
        fs::create_dir(root.join(".qwen")).unwrap();
        fs::write(&control, "{}").unwrap();
        assert_eq!(rig.next().await, change(&control, Verdict::Valid));
        assert!(rig.quiet().await.iter().all(|c| c.path == control));

        fs::write(&settings, "{}").unwrap();
        assert_eq!(rig.next().await, change(&settings, Verdict::Valid));
    }

    #[tokio::test]
    async fn picks_up_files_under_nested_missing_directories() {
        let (_dir, root) = workspace();
        let at_once = root.join("ext/a/b/qwen-extension.json");
        let step_by_step = root.join("ext2/x/y/qwen-extension.json");
        let mut rig = Rig::start(&[at_once.clone(), step_by_step.clone()], WINDOW);

        // The whole chain appears faster than the watch can move down it.
        fs::create_dir_all(at_once.parent().unwrap()).unwrap();
        fs::write(&at_once, "{}").unwrap();
        let before = rig.wait_for(&at_once, Verdict::Valid).await;
        assert_eq!(before, []);

        for dir in ["ext2", "ext2/x", "ext2/x/y"] {
            fs::create_dir(root.join(dir)).unwrap();
        }
        fs::write(&step_by_step, "{}").unwrap();
        let before = rig.wait_for(&step_by_step, Verdict::Valid).await;
        assert!(before.iter().all(|c| c.path == at_once), "{before:?}");
    }

    #[tokio::test]
    async fn follows_a_parent_directory_removed_and_recreated() {
        let (_dir, root) = workspace();
        let qwen = root.join(".qwen");
        let settings = qwen.join("settings.json");
        fs::create_dir(&qwen).unwrap();
        fs::write(&settings, "{}").unwrap();
        let mut rig = Rig::start(std::slice::from_ref(&settings), WINDOW);

        fs::remove_dir_all(&qwen).unwrap();
        assert_eq!(rig.next().await, change(&settings, Verdict::Absent));
        assert_eq!(rig.quiet().await, []);

        fs::create_dir(&qwen).unwrap();
        fs::write(&settings, r#"{"a": 1}"#).unwrap();
        assert_eq!(rig.next().await, change(&settings, Verdict::Valid));
        rig.quiet().await;

        // The new directory is watched, not just looked at once.
        save_by_rename(&settings, "{");
        assert_eq!(rig.next().await, change(&settings, Verdict::Invalid));
    }

    #[tokio::test]
    async fn follows_a_parent_directory_renamed_away_and_back() {
        let (_dir, root) = workspace();
        let qwen = root.join(".qwen");
        let aside = root.join(".qwen.bak");
        let settings = qwen.join("settings.json");
        let control = root.join(".mcp.json");
        fs::create_dir(&qwen).unwrap();
        fs::write(&settings, "{}").unwrap();
        let mut rig = Rig::start(&[settings.clone(), control.clone()], WINDOW);

        fs::rename(&qwen, &aside).unwrap();
        assert_eq!(rig.next().await, change(&settings, Verdict::Absent));
        assert_eq!(rig.quiet().await, []);

        // The old watch followed the directory's inode: it must be gone.
        let judged = rig.judged(&settings);
        fs::write(aside.join("settings.json"), r#"{"moved": true}"#).unwrap();
        fs::write(&control, "{}").unwrap();
        assert_eq!(rig.next().await, change(&control, Verdict::Valid));
        assert!(rig.quiet().await.iter().all(|c| c.path == control));
        assert_eq!(rig.judged(&settings), judged);

        fs::rename(&aside, &qwen).unwrap();
        assert_eq!(rig.next().await, change(&settings, Verdict::Valid));
    }

    #[tokio::test]
    async fn set_files_adds_and_removes_paths() {
        let (_dir, root) = workspace();
        let a = root.join("a.json");
        let b = root.join("b.json");
        let c = root.join("new/c.json");
        let mut rig = Rig::start(std::slice::from_ref(&a), WINDOW);

        rig.watcher.set_files(vec![b.clone()]).unwrap();
        fs::write(&a, "{}").unwrap();
        fs::write(&b, "{}").unwrap();
        assert_eq!(rig.next().await, change(&b, Verdict::Valid));
        assert!(rig.quiet().await.iter().all(|c| c.path == b));
        assert_eq!(rig.judged(&a), 0);

        // Added paths report nothing for their state at the call.
        rig.watcher
            .set_files(vec![a.clone(), b.clone(), c.clone()])
            .unwrap();
        save_by_rename(&a, r#"{"a": 1}"#);
        assert_eq!(rig.next().await, change(&a, Verdict::Valid));
        fs::create_dir(root.join("new")).unwrap();
        fs::write(&c, "{}").unwrap();
        let before = rig.wait_for(&c, Verdict::Valid).await;
        assert!(before.iter().all(|x| x.path == a), "{before:?}");
        assert!(!root.join("new/c.json.tmp~").exists());
    }

    #[tokio::test]
    async fn rejects_relative_and_parent_relative_paths() {
        let judge = json_judge(Log::default());
        for bad in ["rel.json", "/a/../b.json", "/", "/a/.."] {
            let result = Watcher::start(
                vec![PathBuf::from(bad)],
                WatchConfig::default(),
                judge.clone(),
            );
            assert!(
                matches!(result, Err(WatchError::InvalidPath { .. })),
                "{bad}"
            );
        }

        let (_dir, root) = workspace();
        let file = root.join(".mcp.json");
        // `.` components and a trailing slash still match the event paths.
        let mut rig = Rig::start(&[root.join("./.mcp.json/")], WINDOW);
        let err = rig.watcher.set_files(vec!["rel.json".into()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "watch rel.json: not an absolute file path without `..`"
        );
        save_by_rename(&file, "{}");
        assert_eq!(rig.next().await, change(&file, Verdict::Valid));
    }

    #[tokio::test]
    async fn dropping_the_watcher_closes_the_channel() {
        let (_dir, root) = workspace();
        let Rig {
            watcher, mut rx, ..
        } = Rig::start(&[root.join(".mcp.json")], WINDOW);
        drop(watcher);
        assert_eq!(timeout(DEADLINE, rx.recv()).await.unwrap(), None);
    }
}

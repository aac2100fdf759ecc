//! One server's watched source tree (`dev.watch`): which directories under
//! `dev.cwd` may hold watched files, which files the globs match, and what
//! each file held when last looked at.
//!
//! A change is a file whose bytes differ from what they were (or that
//! appeared or vanished): a fingerprint is the file's length, modification
//! time and content hash, so a save that changes nothing — `touch`, a
//! formatter that leaves the file as it was, a build rewriting an output
//! with the same bytes — reloads nothing. Files larger than
//! [`HASHED_BYTES`] are judged by length and modification time only.
//!
//! Nothing here watches or debounces: [`super::dev`] arms a watch on every
//! directory a walk visits and routes events here.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sha2::{Digest, Sha256};
use steward_schema::pathglob::{self, PathGlob};

/// Files up to this size are compared by content.
pub(super) const HASHED_BYTES: u64 = 8 * 1024 * 1024;

/// What a file held when it was last looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fingerprint {
    len: u64,
    modified: Option<SystemTime>,
    hash: Option<[u8; 32]>,
}

impl Fingerprint {
    /// The file at `path` now (`None`: missing, or not a regular file).
    /// Symlinks are followed.
    pub(super) fn of(path: &Path) -> Option<Fingerprint> {
        let meta = fs::metadata(path).ok()?;
        if !meta.is_file() {
            return None;
        }
        let hash = (meta.len() <= HASHED_BYTES)
            .then(|| hash_file(path))
            .flatten();
        Some(Fingerprint {
            len: meta.len(),
            modified: meta.modified().ok(),
            hash,
        })
    }

    /// Whether `self` (taken later) holds what `before` held.
    fn same_as(&self, before: &Fingerprint) -> bool {
        match (self.hash, before.hash) {
            (Some(a), Some(b)) => a == b,
            _ => self.len == before.len && self.modified == before.modified,
        }
    }
}

fn hash_file(path: &Path) -> Option<[u8; 32]> {
    let mut file = fs::File::open(path).ok()?;
    let mut hasher = Sha256::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(_) => return None,
        }
    }
    Some(hasher.finalize().into())
}

/// Editors' temporary and backup files: never a change of the source.
fn is_scratch(name: &str) -> bool {
    name.ends_with('~')
        || name.ends_with(".swp")
        || name.ends_with(".swx")
        || name.ends_with(".tmp")
        || name.starts_with(".#")
        || name == "4913"
        || name.contains("___jb_")
}

/// One server's watched tree.
#[derive(Debug)]
pub(super) struct Tree {
    pub(super) root: PathBuf,
    globs: Vec<PathGlob>,
    /// Watched files (absolute) and what they held.
    files: BTreeMap<PathBuf, Fingerprint>,
    /// Directories a walk visited (each is watched by [`super::dev`]).
    dirs: BTreeSet<PathBuf>,
    /// Files touched by events since the last judgement.
    pending: BTreeSet<PathBuf>,
    /// Directories no longer in the tree, whose watch is to be released.
    released: Vec<PathBuf>,
}

impl Tree {
    /// A tree of `globs` under `root`; nothing is read until [`Tree::walk`].
    /// Globs that do not parse are left out (the loader rejected them).
    pub(super) fn new(root: PathBuf, globs: &[String]) -> Tree {
        Tree {
            root,
            globs: globs
                .iter()
                .filter_map(|g| PathGlob::parse(g).ok())
                .collect(),
            files: BTreeMap::new(),
            dirs: BTreeSet::new(),
            pending: BTreeSet::new(),
            released: Vec::new(),
        }
    }

    /// How many files the globs match now.
    pub(super) fn file_count(&self) -> usize {
        self.files.len()
    }

    /// `path` relative to the root, as segments (`None`: outside it, or not
    /// UTF-8).
    fn segments<'a>(&self, path: &'a Path) -> Option<Vec<&'a str>> {
        let rel = path.strip_prefix(&self.root).ok()?;
        rel.components()
            .map(|c| c.as_os_str().to_str())
            .collect::<Option<Vec<&str>>>()
    }

    fn is_watched_file(&self, path: &Path) -> bool {
        let Some(segments) = self.segments(path) else {
            return false;
        };
        match segments.last() {
            Some(name) if !is_scratch(name) => pathglob::watched(&self.globs, &segments),
            _ => false,
        }
    }

    fn is_worth_watching(&self, dir: &Path) -> bool {
        self.segments(dir)
            .is_some_and(|segments| pathglob::worth_watching(&self.globs, &segments))
    }

    /// Walks `from` (the root, or a directory that appeared under it):
    /// every directory that may hold watched files is handed to `watch`
    /// *before* it is read (a file created in between is seen by one or
    /// the other), and recorded. Files found that were not known are
    /// pending (`baseline`: recorded as they are instead — the first walk).
    /// Symlinked directories are not followed.
    pub(super) fn walk(&mut self, from: &Path, baseline: bool, watch: &mut dyn FnMut(&Path)) {
        let mut stack = vec![from.to_path_buf()];
        while let Some(dir) = stack.pop() {
            if !self.is_worth_watching(&dir) {
                continue;
            }
            watch(&dir);
            self.dirs.insert(dir.clone());
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    stack.push(path);
                } else if self.is_watched_file(&path) && !self.files.contains_key(&path) {
                    if baseline {
                        if let Some(print) = Fingerprint::of(&path) {
                            self.files.insert(path, print);
                        }
                    } else {
                        self.pending.insert(path);
                    }
                }
            }
        }
    }

    /// An event on `path`: a watched file is pending; a directory that
    /// appeared is walked (`watch` arms it); one that went away takes its
    /// files with it. Returns whether anything is pending now.
    pub(super) fn touch(&mut self, path: &Path, watch: &mut dyn FnMut(&Path)) -> bool {
        if !path.starts_with(&self.root) {
            return false;
        }
        let is_dir = fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
        if is_dir {
            if !self.dirs.contains(path) {
                self.walk(path, false, watch);
            }
        } else if self.dirs.contains(path) || path == self.root {
            // Removed or renamed away: what was under it is gone.
            let (gone, kept): (BTreeSet<PathBuf>, BTreeSet<PathBuf>) =
                std::mem::take(&mut self.dirs)
                    .into_iter()
                    .partition(|d| d.starts_with(path));
            self.dirs = kept;
            self.released.extend(gone);
            let gone: Vec<PathBuf> = self
                .files
                .range(path.to_path_buf()..)
                .take_while(|(f, _)| f.starts_with(path))
                .map(|(f, _)| f.clone())
                .collect();
            self.pending.extend(gone);
        } else if self.is_watched_file(path) {
            self.pending.insert(path.to_path_buf());
        }
        !self.pending.is_empty()
    }

    /// Every known file is looked at again, every directory walked again
    /// (events were lost).
    pub(super) fn touch_all(&mut self, watch: &mut dyn FnMut(&Path)) {
        self.pending.extend(self.files.keys().cloned());
        let root = self.root.clone();
        let old = std::mem::take(&mut self.dirs);
        self.walk(&root, false, watch);
        // Released after the walk re-armed what stays: no gap in the watch.
        self.released.extend(old);
    }

    /// Every directory of the tree (to release them all).
    pub(super) fn release_all(&mut self) -> Vec<PathBuf> {
        self.released.extend(std::mem::take(&mut self.dirs));
        std::mem::take(&mut self.released)
    }

    /// Directories that left the tree since the last call.
    pub(super) fn take_released(&mut self) -> Vec<PathBuf> {
        std::mem::take(&mut self.released)
    }

    /// Judges the pending files: those whose content differs from what was
    /// recorded (or that appeared or vanished), relative to the root, in
    /// order. The records follow what the files hold now.
    pub(super) fn judge(&mut self) -> Vec<String> {
        let mut changed = Vec::new();
        for path in std::mem::take(&mut self.pending) {
            let now = Fingerprint::of(&path);
            let before = self.files.get(&path);
            let differs = match (&now, before) {
                (Some(now), Some(before)) => !now.same_as(before),
                (None, None) => false,
                _ => true,
            };
            match now {
                Some(print) => {
                    self.files.insert(path.clone(), print);
                }
                None => {
                    self.files.remove(&path);
                }
            }
            if differs {
                let rel = path.strip_prefix(&self.root).unwrap_or(&path);
                changed.push(rel.to_string_lossy().into_owned());
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn tree(root: &Path, globs: &[&str]) -> Tree {
        let globs: Vec<String> = globs.iter().map(|g| (*g).to_owned()).collect();
        let mut tree = Tree::new(root.to_path_buf(), &globs);
        tree.walk(root, true, &mut |_| {});
        tree
    }

    #[test]
    fn the_walk_visits_only_directories_that_may_hold_watched_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join("src/a.py"), "a");
        write(&root.join("src/pkg/b.py"), "b");
        write(&root.join("src/node_modules/x/c.py"), "c");
        write(&root.join("docs/d.py"), "d");
        write(&root.join("src/e.txt"), "e");
        let mut watched = Vec::new();
        let mut t = Tree::new(root.to_path_buf(), &["src/**/*.py".to_owned()]);
        t.walk(root, true, &mut |d| watched.push(d.to_path_buf()));
        watched.sort();
        assert_eq!(
            watched,
            [root.to_path_buf(), root.join("src"), root.join("src/pkg")]
        );
        assert_eq!(t.file_count(), 2);
    }

    #[test]
    fn only_a_change_of_content_counts() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let file = root.join("server.py");
        write(&file, "print(1)");
        let mut t = tree(root, &["*.py"]);
        let mut none = |_: &Path| {};
        // Rewritten with the same bytes (a newer mtime): nothing.
        write(&file, "print(1)");
        assert!(t.touch(&file, &mut none));
        assert!(t.judge().is_empty());
        write(&file, "print(2)");
        t.touch(&file, &mut none);
        assert_eq!(t.judge(), ["server.py"]);
        // Scratch files of editors never count.
        let swap = root.join(".server.py.swp");
        write(&swap, "x");
        assert!(!t.touch(&swap, &mut none));
        // Removed, then created again.
        fs::remove_file(&file).unwrap();
        t.touch(&file, &mut none);
        assert_eq!(t.judge(), ["server.py"]);
        assert_eq!(t.file_count(), 0);
        write(&file, "print(2)");
        t.touch(&file, &mut none);
        assert_eq!(t.judge(), ["server.py"]);
    }

    #[test]
    fn directories_that_appear_or_vanish_bring_or_take_their_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join("src/a.ts"), "a");
        let mut t = tree(root, &["src/**/*.ts"]);
        let mut armed = Vec::new();
        write(&root.join("src/new/deep/b.ts"), "b");
        assert!(t.touch(&root.join("src/new"), &mut |d| armed.push(d.to_path_buf())));
        assert_eq!(armed, [root.join("src/new"), root.join("src/new/deep")]);
        assert_eq!(t.judge(), ["src/new/deep/b.ts"]);
        fs::rename(root.join("src/new"), root.join("elsewhere")).unwrap();
        assert!(t.touch(&root.join("src/new"), &mut |_| {}));
        assert_eq!(t.judge(), ["src/new/deep/b.ts"]);
        assert!(!t.dirs.contains(&root.join("src/new")));
        assert_eq!(t.file_count(), 1);
    }
}

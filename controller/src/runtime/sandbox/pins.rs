//! The workspace's code-running paths a server must not write (product.md
//! §9, "Nothing planted for later"), found at spawn: the fixed list of
//! [`PINNED`] names, every `.git` of a nested repository or submodule a few
//! levels down, the directory `core.hooksPath` names, and the git
//! directory (and common directory) a worktree's `.git` file points to.
//!
//! Which names are code-running is pure data (`steward_schema::sandbox`);
//! this module only looks at the disk. The shim pins what exists (a
//! read-only bind in the server's mount namespace: it can be neither
//! written nor renamed nor replaced) and keeps an absent *directory* from
//! being created (Landlock: its parent cannot make directories or
//! symbolic links); an absent *file* cannot be held without breaking its
//! readers, so its creation is reported instead.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use steward_schema::sandbox::{PINNED, PinKind};

/// One pinned path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Pin {
    pub path: PathBuf,
    pub kind: PinKind,
}

/// How deep below the workspace nested repositories are looked for
/// (`a/b/c/.git`), and how many directories at most: a bound on the walk a
/// spawn costs in a huge tree.
const NESTED_DEPTH: usize = 3;
const NESTED_BUDGET: usize = 2000;

/// Directories never searched for nested repositories: package and build
/// trees, huge and never a checkout of their own.
const NOT_SEARCHED: [&str; 6] = [
    "node_modules",
    "target",
    ".venv",
    "venv",
    "__pycache__",
    ".git",
];

/// The pins of `workspace` (absolute paths; `writes_git`: the `git-write`
/// profile, whose `.git` directories stay writable).
pub fn of_workspace(workspace: &Path, writes_git: bool) -> Vec<Pin> {
    let mut pins: Vec<Pin> = PINNED
        .iter()
        .filter(|(rel, _)| !(writes_git && *rel == ".git"))
        .map(|(rel, kind)| Pin {
            path: workspace.join(rel),
            kind: *kind,
        })
        .collect();
    if !writes_git {
        for git in nested_repositories(workspace) {
            pins.extend(git_dirs(&git));
        }
        pins.extend(git_dirs(&workspace.join(".git")));
        if let Some(hooks) = hooks_path(workspace) {
            pins.push(Pin {
                path: hooks,
                kind: PinKind::Dir,
            });
        }
    }
    pins.sort();
    pins.dedup();
    pins
}

/// The `.git` entries (directories or files) of repositories nested in
/// `workspace` down to [`NESTED_DEPTH`], the workspace's own excluded.
fn nested_repositories(workspace: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut budget = NESTED_BUDGET;
    let mut level = vec![workspace.to_path_buf()];
    for _ in 0..NESTED_DEPTH {
        let mut next = Vec::new();
        for dir in level {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let name = entry.file_name();
                if !kind.is_dir() || NOT_SEARCHED.iter().any(|n| name == *n) {
                    continue;
                }
                if budget == 0 {
                    return found;
                }
                budget -= 1;
                let path = entry.path();
                let git = path.join(".git");
                if git.symlink_metadata().is_ok() {
                    found.push(git);
                }
                next.push(path);
            }
        }
        level = next;
    }
    found
}

/// A `.git` entry as pins: the entry itself, and when it is a file
/// (a worktree or submodule: `gitdir: …`) the git directory it points to
/// and that directory's common directory.
fn git_dirs(git: &Path) -> Vec<Pin> {
    let mut out = vec![Pin {
        path: git.to_path_buf(),
        kind: PinKind::Dir,
    }];
    let Ok(meta) = git.symlink_metadata() else {
        return out;
    };
    if !meta.is_file() {
        return out;
    }
    let Some(dir) = std::fs::read_to_string(git).ok().and_then(|text| {
        let target = text
            .lines()
            .next()?
            .strip_prefix("gitdir:")?
            .trim()
            .to_owned();
        Some(git.parent()?.join(target))
    }) else {
        return out;
    };
    if let Some(common) = std::fs::read_to_string(dir.join("commondir"))
        .ok()
        .map(|c| dir.join(c.trim()))
    {
        out.push(Pin {
            path: normalize(&common),
            kind: PinKind::Dir,
        });
    }
    out.push(Pin {
        path: normalize(&dir),
        kind: PinKind::Dir,
    });
    out
}

/// The directory `core.hooksPath` of the workspace's repository names
/// (relative to the workspace, or `~/…`), if any.
fn hooks_path(workspace: &Path) -> Option<PathBuf> {
    let config = std::fs::read_to_string(workspace.join(".git/config")).ok()?;
    let value = config_value(&config, "core", "hookspath")?;
    let path = match value.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map(PathBuf::from)?.join(rest),
        None => workspace.join(value),
    };
    Some(normalize(&path))
}

/// The value of `key` in `[section]` of a git config file (names compared
/// case-insensitively; the last one wins, as in git).
fn config_value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut current = String::new();
    let mut value = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(head) = line.strip_prefix('[') {
            let name = head.split([']', ' ', '"']).next().unwrap_or_default();
            current = name.to_ascii_lowercase();
            continue;
        }
        if current != section {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if k.trim().eq_ignore_ascii_case(key) {
            let v = v.split([';', '#']).next().unwrap_or_default().trim();
            value = Some(v.trim_matches('"').to_owned());
        }
    }
    value.filter(|v| !v.is_empty())
}

fn normalize(p: &Path) -> PathBuf {
    steward_schema::load::normalize_lexically(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(pins: &[Pin]) -> Vec<String> {
        pins.iter()
            .map(|p| p.path.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn nested_repositories_worktrees_and_the_hooks_path_are_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        for d in [
            ".git",
            "a/b/.git",
            "a/b/c/d/.git",
            "node_modules/x/.git",
            "hooks",
        ] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        std::fs::write(
            ws.join(".git/config"),
            "[core]\n\tbare = false\n[Core]\n  hooksPath = \"hooks\" ; comment\n",
        )
        .unwrap();
        // A worktree elsewhere whose .git file points into the main repo.
        let main = dir.path().join("main/.git/worktrees/w");
        std::fs::create_dir_all(&main).unwrap();
        std::fs::write(main.join("commondir"), "../..\n").unwrap();
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        std::fs::write(ws.join("wt/.git"), format!("gitdir: {}\n", main.display())).unwrap();
        let pins = paths(&of_workspace(&ws, false));
        let has = |p: &Path| pins.contains(&p.to_string_lossy().into_owned());
        assert!(has(&ws.join(".git")) && has(&ws.join(".vscode")));
        assert!(has(&ws.join("a/b/.git")), "{pins:?}");
        assert!(!has(&ws.join("a/b/c/d/.git")), "deeper than the bound");
        assert!(!has(&ws.join("node_modules/x/.git")));
        assert!(has(&ws.join("hooks")));
        assert!(has(&ws.join("wt/.git")) && has(&main) && has(&dir.path().join("main/.git")));
        // git-write leaves every .git writable, the rest pinned.
        let pins = paths(&of_workspace(&ws, true));
        assert!(!pins.iter().any(|p| p.ends_with(".git")), "{pins:?}");
        assert!(pins.iter().any(|p| p.ends_with(".vscode")));
    }
}

//! Folder trust: is the workspace trusted?
//!
//! When `security.folderTrust.enabled` is not true (read only from settings
//! layers the workspace does not control), every folder is trusted. When it
//! is, the rules of trustedFolders.json decide:
//! - `TRUST_FOLDER p` trusts `p` and everything inside it;
//! - `TRUST_PARENT p` trusts the parent of `p` and everything inside it;
//! - `DO_NOT_TRUST p` distrusts `p` and everything inside it.
//!
//! Paths are compared as Qwen Code compares them: each rule's folder and the
//! workspace both as resolved (a relative rule against the workspace, where
//! Qwen Code runs) and as real paths (symlinks resolved), and a rule
//! applies when any form of the workspace is inside any form of its folder.
//! When several rules apply, the most specific (deepest) folder decides,
//! and on a tie distrust wins; no rule at all means untrusted (nobody has
//! said yes).

use std::path::{Path, PathBuf};

use crate::formats::{TrustLevel, TrustedFoldersFile};
use crate::load::{absolute_in, normalize_lexically};

/// The folder a rule speaks about, as written (`TRUST_PARENT`: its parent).
pub fn effective_folder(rule_path: &Path, level: TrustLevel) -> PathBuf {
    match level {
        TrustLevel::TrustParent => match rule_path.parent() {
            Some(p) if p.as_os_str().is_empty() => PathBuf::from("."),
            Some(p) => p.to_path_buf(),
            None => rule_path.to_path_buf(),
        },
        _ => rule_path.to_path_buf(),
    }
}

/// `path` resolved against `base`, and its real path (`resolve`).
fn variants(path: &Path, base: &Path, resolve: &dyn Fn(&Path) -> PathBuf) -> [PathBuf; 2] {
    let lexical = normalize_lexically(&absolute_in(base, &path.to_string_lossy()));
    let real = resolve(&lexical);
    [lexical, real]
}

/// Whether `workspace` (canonical) is trusted under `rules`. `resolve` maps a
/// path to its canonical form (symlinks resolved) when it exists.
pub fn is_trusted(
    workspace: &Path,
    folder_trust_enabled: bool,
    rules: &TrustedFoldersFile,
    resolve: &dyn Fn(&Path) -> PathBuf,
) -> bool {
    if !folder_trust_enabled {
        return true;
    }
    let places = variants(workspace, workspace, resolve);
    let mut best: Option<(usize, bool)> = None;
    for (path, level) in rules {
        let folder = effective_folder(Path::new(path), *level);
        let depth = variants(&folder, workspace, resolve)
            .iter()
            .filter(|f| places.iter().any(|w| w.starts_with(f)))
            .map(|f| f.components().count())
            .max();
        let Some(depth) = depth else {
            continue;
        };
        let trusts = *level != TrustLevel::DoNotTrust;
        best = match best {
            Some((d, t)) if d > depth || (d == depth && !t) => Some((d, t)),
            _ => Some((depth, trusts)),
        };
    }
    best.is_some_and(|(_, trusts)| trusts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[(&str, TrustLevel)]) -> TrustedFoldersFile {
        list.iter().map(|(p, l)| ((*p).to_owned(), *l)).collect()
    }

    fn trusted(ws: &str, list: &[(&str, TrustLevel)]) -> bool {
        is_trusted(Path::new(ws), true, &rules(list), &|p| p.to_path_buf())
    }

    use TrustLevel::*;

    #[test]
    fn disabled_trusts_everything() {
        assert!(is_trusted(
            Path::new("/x"),
            false,
            &rules(&[("/x", DoNotTrust)]),
            &|p| p.to_path_buf()
        ));
    }

    #[test]
    fn no_rule_is_untrusted() {
        assert!(!trusted("/home/u/ws", &[]));
        assert!(!trusted("/home/u/ws", &[("/other", TrustFolder)]));
    }

    #[test]
    fn trust_folder_covers_itself_and_descendants_only() {
        assert!(trusted("/home/u/ws", &[("/home/u/ws", TrustFolder)]));
        assert!(trusted("/home/u/ws/sub", &[("/home/u/ws", TrustFolder)]));
        assert!(trusted("/home/u/ws", &[("/home/u/ws/", TrustFolder)]));
        assert!(!trusted("/home/u/wsx", &[("/home/u/ws", TrustFolder)]));
        assert!(!trusted("/home/u", &[("/home/u/ws", TrustFolder)]));
    }

    #[test]
    fn trust_parent_covers_siblings() {
        assert!(trusted("/home/u/ws", &[("/home/u/other", TrustParent)]));
        assert!(trusted("/home/u/ws", &[("/home/u/ws", TrustParent)]));
        assert!(!trusted("/home/v/ws", &[("/home/u/other", TrustParent)]));
    }

    #[test]
    fn most_specific_rule_wins_and_distrust_wins_ties() {
        assert!(!trusted(
            "/code/secret",
            &[("/code", TrustFolder), ("/code/secret", DoNotTrust)]
        ));
        assert!(trusted(
            "/code/secret/ok",
            &[
                ("/code", TrustFolder),
                ("/code/secret", DoNotTrust),
                ("/code/secret/ok", TrustFolder)
            ]
        ));
        assert!(!trusted(
            "/code",
            &[("/code/x", TrustParent), ("/code", DoNotTrust)]
        ));
    }

    /// Qwen Code resolves a relative rule against where it runs: the workspace.
    #[test]
    fn relative_rule_paths_are_resolved_against_the_workspace() {
        assert!(trusted("/ws", &[(".", TrustFolder)]));
        assert!(trusted("/a/ws", &[("../ws", TrustFolder)]));
        assert!(trusted("/a/ws", &[("sibling", TrustParent)]));
        assert!(!trusted("/ws", &[("sub", TrustFolder)]));
        assert!(!trusted("/a/ws", &[(".", DoNotTrust), ("/a", TrustFolder)]));
    }

    /// A rule naming a symlink applies to where it points, and a rule naming
    /// the real folder applies to a workspace reached through a symlink.
    #[test]
    fn rules_compare_resolved_and_real_paths() {
        let resolve = |p: &Path| match p.to_str() {
            Some("/links/ws") => PathBuf::from("/real/ws"),
            _ => p.to_path_buf(),
        };
        let rules = |list: &[(&str, TrustLevel)]| -> TrustedFoldersFile {
            list.iter().map(|(p, l)| ((*p).to_owned(), *l)).collect()
        };
        assert!(is_trusted(
            Path::new("/real/ws"),
            true,
            &rules(&[("/links/ws", TrustFolder)]),
            &resolve
        ));
        assert!(!is_trusted(
            Path::new("/real/ws"),
            true,
            &rules(&[("/real", TrustFolder), ("/links/ws", DoNotTrust)]),
            &resolve
        ));
    }
}

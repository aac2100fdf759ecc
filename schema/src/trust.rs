//! Folder trust: is the workspace trusted?
//!
//! When `security.folderTrust.enabled` is not true (read only from settings
//! layers the workspace does not control), every folder is trusted. When it
//! is, the rules of trustedFolders.json decide:
//! - `TRUST_FOLDER p` trusts `p` and everything inside it;
//! - `TRUST_PARENT p` trusts the parent of `p` and everything inside it;
//! - `DO_NOT_TRUST p` distrusts `p` and everything inside it.
//!
//! The workspace is inside-a-trusted-root when some trusting rule's folder
//! contains it. When several rules contain it, the most specific (longest)
//! folder decides, and on a tie distrust wins; no rule at all means
//! untrusted (nobody has said yes).

use std::path::{Path, PathBuf};

use crate::formats::{TrustLevel, TrustedFoldersFile};
use crate::load::normalize_lexically;

/// The folder a rule speaks about.
pub fn effective_folder(rule_path: &Path, level: TrustLevel) -> PathBuf {
    let p = normalize_lexically(rule_path);
    match level {
        TrustLevel::TrustParent => p.parent().map(Path::to_path_buf).unwrap_or(p),
        _ => p,
    }
}

/// Whether `workspace` (canonical) is trusted under `rules`. `resolve` maps a
/// rule's path to its canonical form (symlinks resolved) when it exists.
pub fn is_trusted(
    workspace: &Path,
    folder_trust_enabled: bool,
    rules: &TrustedFoldersFile,
    resolve: &dyn Fn(&Path) -> PathBuf,
) -> bool {
    if !folder_trust_enabled {
        return true;
    }
    let mut best: Option<(usize, bool)> = None;
    for (path, level) in rules {
        let rule_path = resolve(Path::new(path));
        if !rule_path.is_absolute() {
            continue;
        }
        let folder = effective_folder(&rule_path, *level);
        if !workspace.starts_with(&folder) {
            continue;
        }
        let depth = folder.components().count();
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

    #[test]
    fn relative_rule_paths_are_ignored() {
        assert!(!trusted("/ws", &[("ws", TrustFolder)]));
    }
}

//! A server's private home (product.md §9, "Nothing planted for later"):
//! under every profile but `off`, a server's caches, data and state live in
//! directories of its own, `HOME_DIR/steward/sandbox/<workspace>/<server>/`
//! — `cache/`, `data/`, `state/` — which the XDG base-directory variables
//! and the package runners' cache variables point to. A server therefore
//! never writes a cache another server (or the user's own `npx`, `uvx`,
//! `pipx`, `pre-commit`) runs code from, and its downloads are reused
//! across its restarts (the id is stable per workspace and server).
//!
//! A home belongs to one server *and one profile*: a server that planted
//! code in its own caches under a narrow profile never has it run under a
//! wider one — widening its profile (or replacing its package under the
//! same name and a new profile) starts from an empty home.
//!
//! `<workspace>` is the first 16 hex digits of the workspace path's
//! SHA-256 (as Steward's state directory), holding a `workspace` file with
//! the path, so that [`prune`] can tell which homes belong to servers or
//! workspaces that are gone.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use steward_schema::canonical::sha256_hex;
use steward_schema::sandbox::Sandbox;

/// The variables a server's private home sets, and where under the home
/// each points. A variable the server's own entry sets is left as it is
/// (a deliberate, shared cache is the user's choice: README "Sandbox").
pub const VARIABLES: [(&str, &str); 14] = [
    ("XDG_CACHE_HOME", "cache"),
    ("XDG_DATA_HOME", "data"),
    ("XDG_STATE_HOME", "state"),
    ("npm_config_cache", "cache/npm"),
    ("UV_CACHE_DIR", "cache/uv"),
    ("UV_TOOL_DIR", "data/uv/tools"),
    ("UV_PYTHON_INSTALL_DIR", "data/uv/python"),
    ("PIP_CACHE_DIR", "cache/pip"),
    ("PIPX_HOME", "data/pipx"),
    ("BUN_INSTALL_CACHE_DIR", "cache/bun"),
    ("GOCACHE", "cache/go-build"),
    ("GOMODCACHE", "data/go/mod"),
    ("PRE_COMMIT_HOME", "cache/pre-commit"),
    ("DENO_DIR", "cache/deno"),
];

/// `cargo`'s home, set only for a server started by `cargo` itself (a
/// `cargo run` server): elsewhere it would hide the user's toolchain
/// settings from servers that never build anything.
pub const CARGO_HOME: (&str, &str) = ("CARGO_HOME", "cargo");

/// The owner of an MCP server's private home.
pub fn mcp_owner(name: &str) -> String {
    format!("mcp-{name}")
}

/// The owner of a language server's private home.
pub fn lsp_owner(name: &str) -> String {
    format!("lsp-{name}")
}

/// The file in a workspace's folder of homes that names the workspace.
const WORKSPACE_FILE: &str = "workspace";

/// Where the private homes of `workspace`'s servers are.
pub fn workspace_root(home_dir: &Path, workspace: &Path) -> PathBuf {
    let digest = sha256_hex(workspace.to_string_lossy().as_bytes());
    home_dir.join("steward/sandbox").join(&digest[..16])
}

/// The private home of the server `owner` (`mcp-NAME`, `lsp-NAME`) under
/// the profile `profile`, under `root` (see [`workspace_root`]): its name
/// made safe for a path, and a digest of name and profile that keeps two
/// names that read the same apart and each profile's home its own.
pub fn dir_of(root: &Path, owner: &str, profile: &Sandbox) -> PathBuf {
    let safe: String = owner
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let profile = serde_json::to_string(profile).unwrap_or_default();
    let digest = sha256_hex(format!("{owner}\0{profile}").as_bytes());
    root.join(format!(
        "{}-{}",
        safe.trim_start_matches('.'),
        &digest[..12]
    ))
}

/// Makes the home (0700 throughout) and its subdirectories, and records
/// which workspace its folder belongs to.
pub fn create(root: &Path, dir: &Path, workspace: &Path, cargo: bool) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true).mode(0o700);
    let cargo_dir = cargo.then_some(CARGO_HOME.1);
    for (_, rel) in VARIABLES
        .iter()
        .map(|(k, v)| (*k, *v))
        .chain(cargo_dir.map(|c| ("", c)))
    {
        builder.create(dir.join(rel))?;
    }
    let marker = root.join(WORKSPACE_FILE);
    if !marker.exists() {
        crate::support::fs::write_atomically(&marker, workspace.to_string_lossy().as_bytes())?;
    }
    Ok(())
}

/// Points the server's variables at its home, except those its entry set.
pub fn set_variables(
    dir: &Path,
    cargo: bool,
    entry: &BTreeMap<String, String>,
    env: &mut BTreeMap<String, String>,
) {
    let cargo = cargo.then_some(CARGO_HOME);
    for (key, rel) in VARIABLES.iter().copied().chain(cargo) {
        if !entry.contains_key(key) {
            env.insert(key.to_owned(), dir.join(rel).to_string_lossy().into_owned());
        }
    }
}

/// What [`prune`] removed (or would remove).
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pruned {
    /// Homes of servers that no longer exist in this workspace.
    pub servers: Vec<PathBuf>,
    /// Folders of workspaces that no longer exist on disk.
    pub workspaces: Vec<PathBuf>,
    /// Bytes they held.
    pub bytes: u64,
}

/// Removes (unless `dry_run`) the private homes of `workspace` that belong
/// to none of `owners` (each with the profile it runs under now), and the
/// folders of every workspace that no longer exists.
pub fn prune(
    home_dir: &Path,
    workspace: &Path,
    owners: &[(String, Sandbox)],
    dry_run: bool,
) -> io::Result<Pruned> {
    let mut out = Pruned::default();
    let all = home_dir.join("steward/sandbox");
    let mine = workspace_root(home_dir, workspace);
    let keep: Vec<PathBuf> = owners.iter().map(|(o, p)| dir_of(&mine, o, p)).collect();
    let entries = match std::fs::read_dir(&all) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for folder in entries.flatten().map(|e| e.path()) {
        if folder == mine {
            for home in std::fs::read_dir(&folder)?.flatten().map(|e| e.path()) {
                if home.is_dir() && !keep.contains(&home) {
                    out.bytes += size_of(&home);
                    out.servers.push(home);
                }
            }
            continue;
        }
        let gone = std::fs::read_to_string(folder.join(WORKSPACE_FILE))
            .map(|w| !Path::new(w.trim()).is_dir())
            .unwrap_or(false);
        if gone {
            out.bytes += size_of(&folder);
            out.workspaces.push(folder);
        }
    }
    out.servers.sort();
    out.workspaces.sort();
    if !dry_run {
        for dir in out.servers.iter().chain(&out.workspaces) {
            remove_all(dir)?;
        }
    }
    Ok(out)
}

/// Removes `dir`, making read-only directories inside it writable first
/// (package managers leave some: Go's module cache, npm's tarballs).
fn remove_all(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if std::fs::remove_dir_all(dir).is_ok() {
        return Ok(());
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
    }
    std::fs::remove_dir_all(dir)
}

/// The bytes of the files under `dir` (symbolic links not followed).
fn size_of(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(entry.path()),
                Ok(t) if t.is_file() => total += entry.metadata().map_or(0, |m| m.len()),
                _ => {}
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn std() -> Sandbox {
        Sandbox::standard()
    }

    #[test]
    fn homes_are_stable_distinct_and_pruned_when_their_server_or_workspace_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let home_dir = dir.path().join("qwen");
        let ws = dir.path().join("ws");
        let gone_ws = dir.path().join("gone");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&gone_ws).unwrap();
        let root = workspace_root(&home_dir, &ws);
        let a = dir_of(&root, "mcp-a", &std());
        assert_eq!(a, dir_of(&root, "mcp-a", &std()), "stable");
        assert_ne!(
            dir_of(&root, "mcp-a/b", &std()),
            dir_of(&root, "mcp-a_b", &std())
        );
        assert!(dir_of(&root, "mcp-../..", &std()).starts_with(&root));
        let wider = Sandbox::builtin("git-write").unwrap();
        assert_ne!(a, dir_of(&root, "mcp-a", &wider), "a home per profile");
        for (owner, r, w) in [("mcp-a", &root, &ws), ("mcp-old", &root, &ws)] {
            create(r, &dir_of(r, owner, &std()), w, false).unwrap();
        }
        let other = workspace_root(&home_dir, &gone_ws);
        create(&other, &dir_of(&other, "lsp-x", &std()), &gone_ws, true).unwrap();
        assert!(dir_of(&other, "lsp-x", &std()).join("cargo").is_dir());
        std::fs::write(dir_of(&root, "mcp-old", &std()).join("cache/f"), "12345").unwrap();
        std::fs::remove_dir_all(&gone_ws).unwrap();

        let seen = prune(&home_dir, &ws, &[("mcp-a".to_owned(), std())], true).unwrap();
        assert_eq!(seen.servers, [dir_of(&root, "mcp-old", &std())]);
        assert_eq!(seen.workspaces, std::slice::from_ref(&other));
        assert_eq!(seen.bytes, 5 + gone_ws.to_string_lossy().len() as u64);
        assert!(
            dir_of(&root, "mcp-old", &std()).exists(),
            "a dry run removes nothing"
        );
        prune(&home_dir, &ws, &[("mcp-a".to_owned(), std())], false).unwrap();
        assert!(!dir_of(&root, "mcp-old", &std()).exists() && !other.exists());
        assert!(a.join("cache").is_dir());

        let mut env = BTreeMap::new();
        let entry = BTreeMap::from([("UV_CACHE_DIR".to_owned(), "/shared".to_owned())]);
        set_variables(&a, false, &entry, &mut env);
        assert_eq!(
            env["npm_config_cache"],
            a.join("cache/npm").to_string_lossy()
        );
        assert!(!env.contains_key("UV_CACHE_DIR") && !env.contains_key("CARGO_HOME"));
    }
}

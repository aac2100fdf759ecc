//! Where every source and every piece of controller state lives on disk:
//! `HOME_DIR`, the canonical workspace root, and the paths
//! derived from them and from the `QWEN_CODE_*` overrides.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use steward_schema::canonical::sha256_hex;

/// Resolved locations for one workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// `$QWEN_HOME`, else `~/.qwen`.
    pub home_dir: PathBuf,
    /// The user's home directory (`$HOME`): `~` of sandbox profiles, where
    /// the credential stores are.
    pub user_home: Option<PathBuf>,
    /// The canonical workspace root (symlinks resolved once, at start).
    pub workspace: PathBuf,
    pub system_defaults: PathBuf,
    pub user_settings: PathBuf,
    pub workspace_settings: PathBuf,
    pub system_settings: PathBuf,
    pub mcp_json: PathBuf,
    pub lsp_json: PathBuf,
    pub extensions_dir: PathBuf,
    pub trusted_folders: PathBuf,
    pub approvals: PathBuf,
    /// Steward's own binding of each approved server to the permission
    /// profile that was approved (`HOME_DIR/steward/sandbox-approvals.json`;
    /// never in Qwen Code's approvals file).
    pub sandbox_approvals: PathBuf,
    /// The user's runtime directory for Steward: `$XDG_RUNTIME_DIR/steward`,
    /// else `$TMPDIR/steward-<uid>` (`/tmp` without TMPDIR). Holds the
    /// per-workspace lock that no other HOME_DIR can side-step.
    pub runtime_dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum PathsError {
    #[error("resolve the workspace {path}: {source}")]
    Workspace {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("use the workspace {path}: it is not a directory")]
    NotADirectory { path: PathBuf },
    #[error("find HOME_DIR: neither QWEN_HOME nor HOME is set")]
    NoHome,
    #[error("resolve QWEN_HOME {value}: {source}")]
    QwenHome {
        value: String,
        source: std::io::Error,
    },
}

/// `QWEN_HOME` as Qwen Code resolves it: `~` and `~/…` against HOME, a
/// relative path against the current directory.
fn qwen_home(value: &str, home: Option<&Path>) -> Result<PathBuf, PathsError> {
    let tilde = value == "~" || value.starts_with("~/");
    let path = match (tilde, home) {
        (true, Some(home)) => home.join(value.trim_start_matches('~').trim_start_matches('/')),
        (true, None) => return Err(PathsError::NoHome),
        (false, _) => PathBuf::from(value),
    };
    let path = std::path::absolute(&path).map_err(|source| PathsError::QwenHome {
        value: value.to_owned(),
        source,
    })?;
    Ok(steward_schema::load::normalize_lexically(&path))
}

impl Paths {
    /// Resolve from the environment `env` and a workspace directory.
    pub fn resolve(workspace: &Path, env: &BTreeMap<String, String>) -> Result<Self, PathsError> {
        let workspace =
            std::fs::canonicalize(workspace).map_err(|source| PathsError::Workspace {
                path: workspace.to_path_buf(),
                source,
            })?;
        if !workspace.is_dir() {
            return Err(PathsError::NotADirectory { path: workspace });
        }
        let home = env.get("HOME").filter(|v| !v.is_empty()).map(PathBuf::from);
        let home_dir = match env.get("QWEN_HOME").filter(|v| !v.is_empty()) {
            Some(h) => qwen_home(h, home.as_deref())?,
            None => home.clone().ok_or(PathsError::NoHome)?.join(".qwen"),
        };
        let var = |name: &str, default: PathBuf| {
            env.get(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .unwrap_or(default)
        };
        let system_settings = var(
            "QWEN_CODE_SYSTEM_SETTINGS_PATH",
            PathBuf::from("/etc/qwen-code/settings.json"),
        );
        // As in Qwen Code: the defaults live beside the system settings.
        let system_defaults = var(
            "QWEN_CODE_SYSTEM_DEFAULTS_PATH",
            system_settings
                .parent()
                .unwrap_or(Path::new("/"))
                .join("system-defaults.json"),
        );
        let user_settings = home_dir.join("settings.json");
        let mut workspace_settings = workspace.join(".qwen").join("settings.json");
        // Workspace = home: one file, which is the user layer (the merge
        // then drops the workspace layer, and a live edit must land in the
        // user slot). Spelled one way, so both see it.
        if same_file(&workspace_settings, &user_settings) {
            workspace_settings = user_settings.clone();
        }
        Ok(Paths {
            user_home: home,
            system_defaults,
            user_settings,
            workspace_settings,
            system_settings,
            mcp_json: workspace.join(".mcp.json"),
            lsp_json: workspace.join(".lsp.json"),
            extensions_dir: home_dir.join("extensions"),
            trusted_folders: var(
                "QWEN_CODE_TRUSTED_FOLDERS_PATH",
                home_dir.join("trustedFolders.json"),
            ),
            approvals: var(
                "QWEN_CODE_MCP_APPROVALS_PATH",
                home_dir.join("mcpApprovals.json"),
            ),
            runtime_dir: runtime_dir(env),
            sandbox_approvals: home_dir.join("steward").join("sandbox-approvals.json"),
            home_dir,
            workspace,
        })
    }

    /// The source files whose changes are applied live (extensions are read
    /// at start and on `steward reload` only).
    pub fn watched_files(&self) -> Vec<PathBuf> {
        vec![
            self.system_defaults.clone(),
            self.user_settings.clone(),
            self.workspace_settings.clone(),
            self.system_settings.clone(),
            self.mcp_json.clone(),
            self.lsp_json.clone(),
            self.trusted_folders.clone(),
            self.approvals.clone(),
            self.sandbox_approvals.clone(),
        ]
    }

    /// Per-workspace controller state directory under HOME_DIR (never in the
    /// workspace): lock, control socket, stopped-servers list, tool pins, catalog cache,
    /// HTTP sessions.
    pub fn state_dir(&self) -> PathBuf {
        let digest = sha256_hex(self.workspace.to_string_lossy().as_bytes());
        self.home_dir.join("steward").join(&digest[..16])
    }

    pub fn lock_file(&self) -> PathBuf {
        self.state_dir().join("controller.lock")
    }

    /// The lock keyed by the canonical workspace alone (whatever HOME_DIR
    /// is), under [`Paths::runtime_dir`].
    pub fn workspace_lock_file(&self) -> PathBuf {
        self.runtime_file("lock")
    }

    /// Beside [`Paths::workspace_lock_file`]: the running controller's
    /// instance, whose leftovers the next one cleans up if it was killed.
    pub fn workspace_instance_file(&self) -> PathBuf {
        self.runtime_file("instance")
    }

    fn runtime_file(&self, extension: &str) -> PathBuf {
        let digest = sha256_hex(self.workspace.to_string_lossy().as_bytes());
        self.runtime_dir
            .join(format!("{}.{extension}", &digest[..16]))
    }

    /// The control sockets of every controller of this HOME_DIR (this
    /// workspace's among them), for what concerns them all (a secret or a
    /// sign-in changed). A socket left by a killed controller is listed.
    pub fn controller_sockets(&self) -> Vec<PathBuf> {
        let Ok(dirs) = std::fs::read_dir(self.home_dir.join("steward")) else {
            return Vec::new();
        };
        let mut sockets: Vec<PathBuf> = dirs
            .flatten()
            .map(|d| d.path().join("control.sock"))
            .filter(|p| p.exists())
            .collect();
        sockets.sort();
        sockets
    }

    pub fn socket_path(&self) -> PathBuf {
        self.state_dir().join("control.sock")
    }

    /// The agent endpoint's socket (`steward mcp` attaches to it).
    pub fn mcp_socket_path(&self) -> PathBuf {
        self.state_dir().join("mcp.sock")
    }

    pub fn stopped_file(&self) -> PathBuf {
        self.state_dir().join("stopped.json")
    }

    /// The tool definitions pinned per server (`gateway::pins`), never in
    /// the approvals file Qwen Code shares.
    pub fn tool_pins_file(&self) -> PathBuf {
        self.state_dir().join("toolPins.json")
    }

    /// What each MCP server offered when it last ran (`gateway::cache`),
    /// listed at once by the next controller.
    pub fn catalog_cache_file(&self) -> PathBuf {
        self.state_dir().join("catalogCache.json")
    }

    /// The agent endpoint's HTTP sessions (`gateway::http_sessions`), so
    /// that the next controller accepts their `Mcp-Session-Id`.
    pub fn http_sessions_file(&self) -> PathBuf {
        self.state_dir().join("httpSessions.json")
    }
}

/// Whether two paths name the same file, existing or not: the same name in
/// the same directory (symlinks in the directories resolved).
fn same_file(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    let dir = |p: &Path| p.parent().and_then(|d| std::fs::canonicalize(d).ok());
    a.file_name() == b.file_name() && dir(a).is_some() && dir(a) == dir(b)
}

fn runtime_dir(env: &BTreeMap<String, String>) -> PathBuf {
    let absolute = |name: &str| env.get(name).map(PathBuf::from).filter(|p| p.is_absolute());
    match absolute("XDG_RUNTIME_DIR") {
        Some(dir) => dir.join("steward"),
        None => absolute("TMPDIR")
            .unwrap_or_else(|| PathBuf::from("/tmp"))
            .join(format!("steward-{}", effective_uid())),
    }
}

/// This process's effective user id.
#[allow(unsafe_code)]
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[derive(Debug, thiserror::Error)]
pub enum PrivateDirError {
    #[error("create the private directory {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "use the directory {path}: {why}; Steward keeps its lock and sockets only in a directory of its own user"
    )]
    NotPrivate { path: PathBuf, why: String },
}

/// Creates `dir` (and missing parents) readable by this user only: mode
/// 0700 whatever the umask, and an existing `dir` is made 0700. Refuses a
/// `dir` that is a symlink or belongs to another user (a shared `/tmp`).
pub fn create_private_dir(dir: &Path) -> Result<(), PrivateDirError> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
    let create = |source| PrivateDirError::Create {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(create)?;
    let meta = std::fs::symlink_metadata(dir).map_err(create)?;
    let not_private = |why: String| PrivateDirError::NotPrivate {
        path: dir.to_path_buf(),
        why,
    };
    if !meta.is_dir() {
        return Err(not_private("it is not a directory".to_owned()));
    }
    if meta.uid() != effective_uid() {
        return Err(not_private(format!("it belongs to uid {}", meta.uid())));
    }
    if meta.mode() & 0o777 != 0o700 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(create)?;
    }
    Ok(())
}

/// The process environment as a sorted map (non-UTF-8 entries skipped).
pub fn process_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn workspace_settings_that_are_the_user_settings_are_spelled_as_them() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        std::fs::create_dir_all(home.join(".qwen")).unwrap();
        let link = root.path().join("link-to-home");
        std::os::unix::fs::symlink(&home, &link).unwrap();
        // HOME_DIR spelled through a symlink, the workspace canonical.
        let env = BTreeMap::from([(
            "QWEN_HOME".to_owned(),
            link.join(".qwen").to_string_lossy().into_owned(),
        )]);
        let paths = Paths::resolve(&home, &env).unwrap();
        assert_eq!(paths.workspace_settings, paths.user_settings);
        assert_eq!(paths.user_settings, link.join(".qwen/settings.json"));

        let other = root.path().join("ws");
        std::fs::create_dir_all(&other).unwrap();
        let paths = Paths::resolve(&other, &env).unwrap();
        assert_ne!(paths.workspace_settings, paths.user_settings);
    }

    #[test]
    fn private_dirs_are_0700_whatever_they_were() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        create_private_dir(&dir).unwrap();
        assert_eq!((mode(&dir), mode(&root.path().join("a"))), (0o700, 0o700));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        create_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
    }

    #[test]
    fn a_symlink_is_not_a_private_dir() {
        let root = tempfile::tempdir().unwrap();
        let link = root.path().join("link");
        std::os::unix::fs::symlink(root.path(), &link).unwrap();
        let err = create_private_dir(&link).unwrap_err();
        assert!(err.to_string().contains("it is not a directory"), "{err}");
    }

    #[test]
    fn the_runtime_dir_is_xdg_runtime_dir_else_per_user_under_tmpdir() {
        let env = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(
            runtime_dir(&env(&[
                ("XDG_RUNTIME_DIR", "/run/user/7"),
                ("TMPDIR", "/t")
            ])),
            Path::new("/run/user/7/steward")
        );
        let uid = effective_uid();
        assert_eq!(
            runtime_dir(&env(&[("XDG_RUNTIME_DIR", "rel"), ("TMPDIR", "/t")])),
            PathBuf::from(format!("/t/steward-{uid}"))
        );
        assert_eq!(
            runtime_dir(&env(&[])),
            PathBuf::from(format!("/tmp/steward-{uid}"))
        );
    }

    fn paths(vars: &[(&str, &str)]) -> Paths {
        let ws = std::env::temp_dir();
        let env = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Paths::resolve(&ws, &env).unwrap()
    }

    #[test]
    fn qwen_home_resolves_tilde_and_relative_paths_as_qwen_code_does() {
        let p = paths(&[("HOME", "/h"), ("QWEN_HOME", "~/q")]);
        assert_eq!(p.home_dir, Path::new("/h/q"));
        let p = paths(&[("HOME", "/h"), ("QWEN_HOME", "~")]);
        assert_eq!(p.home_dir, Path::new("/h"));
        let p = paths(&[("HOME", "/h"), ("QWEN_HOME", "rel/./q")]);
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(p.home_dir, cwd.join("rel/q"));
        assert_eq!(p.user_settings, cwd.join("rel/q/settings.json"));
    }

    #[test]
    fn system_defaults_live_beside_the_system_settings() {
        let p = paths(&[
            ("HOME", "/h"),
            ("QWEN_CODE_SYSTEM_SETTINGS_PATH", "/opt/q/s.json"),
        ]);
        assert_eq!(p.system_defaults, Path::new("/opt/q/system-defaults.json"));
        let p = paths(&[("HOME", "/h")]);
        assert_eq!(
            p.system_defaults,
            Path::new("/etc/qwen-code/system-defaults.json")
        );
        let p = paths(&[
            ("HOME", "/h"),
            ("QWEN_CODE_SYSTEM_SETTINGS_PATH", "/opt/q/s.json"),
            ("QWEN_CODE_SYSTEM_DEFAULTS_PATH", "/d.json"),
        ]);
        assert_eq!(p.system_defaults, Path::new("/d.json"));
    }
}

//! Where every source and every piece of controller state lives on disk
//! (product.md §1): `HOME_DIR`, the canonical workspace root, and the paths
//! derived from them and from the `QWEN_CODE_*` overrides.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use steward_schema::canonical::sha256_hex;

/// Resolved locations for one workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// `$QWEN_HOME`, else `~/.qwen`.
    pub home_dir: PathBuf,
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
}

#[derive(Debug, thiserror::Error)]
pub enum PathsError {
    #[error("resolve the workspace {path}: {source}")]
    Workspace {
        path: PathBuf,
        source: std::io::Error,
    },
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
        let home = env.get("HOME").filter(|v| !v.is_empty()).map(PathBuf::from);
        let home_dir = match env.get("QWEN_HOME").filter(|v| !v.is_empty()) {
            Some(h) => qwen_home(h, home.as_deref())?,
            None => home.ok_or(PathsError::NoHome)?.join(".qwen"),
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
        Ok(Paths {
            system_defaults,
            user_settings: home_dir.join("settings.json"),
            workspace_settings: workspace.join(".qwen").join("settings.json"),
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
            home_dir,
            workspace,
        })
    }

    /// Per-workspace controller state directory under HOME_DIR (never in the
    /// workspace): lock, control socket, stopped-servers list.
    pub fn state_dir(&self) -> PathBuf {
        let digest = sha256_hex(self.workspace.to_string_lossy().as_bytes());
        self.home_dir.join("steward").join(&digest[..16])
    }

    pub fn lock_file(&self) -> PathBuf {
        self.state_dir().join("controller.lock")
    }

    pub fn socket_path(&self) -> PathBuf {
        self.state_dir().join("control.sock")
    }

    pub fn stopped_file(&self) -> PathBuf {
        self.state_dir().join("stopped.json")
    }
}

/// The process environment as a sorted map (non-UTF-8 entries skipped).
pub fn process_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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

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
}

impl Paths {
    /// Resolve from the environment `env` and a workspace directory.
    pub fn resolve(workspace: &Path, env: &BTreeMap<String, String>) -> Result<Self, PathsError> {
        let workspace =
            std::fs::canonicalize(workspace).map_err(|source| PathsError::Workspace {
                path: workspace.to_path_buf(),
                source,
            })?;
        let home_dir = match env.get("QWEN_HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h),
            None => PathBuf::from(env.get("HOME").ok_or(PathsError::NoHome)?).join(".qwen"),
        };
        let var = |name: &str, default: PathBuf| {
            env.get(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .unwrap_or(default)
        };
        Ok(Paths {
            system_defaults: var(
                "QWEN_CODE_SYSTEM_DEFAULTS_PATH",
                PathBuf::from("/etc/qwen-code/system-defaults.json"),
            ),
            user_settings: home_dir.join("settings.json"),
            workspace_settings: workspace.join(".qwen").join("settings.json"),
            system_settings: var(
                "QWEN_CODE_SYSTEM_SETTINGS_PATH",
                PathBuf::from("/etc/qwen-code/settings.json"),
            ),
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
        ]
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

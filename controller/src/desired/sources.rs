//! Reading sources from disk: the only place file contents enter the pure
//! pipeline of `steward-schema`. Everything here is plain blocking I/O on
//! small files; callers on the async side use `spawn_blocking` or accept it.

use std::path::{Path, PathBuf};

use steward_schema::desired::SourceSet;
use steward_schema::enablement::{self, ActivationFiles};
use steward_schema::load::{self, Content, FileText, LoadContext, LoadMode, ParsedSource};
use steward_schema::resource::{SourceKind, SourceStatus};

use crate::support::paths::Paths;

/// The largest source file Steward reads. Configuration files are
/// kilobytes; the cap only stops a runaway read (a symlink to `/dev/zero`, a
/// log file saved over a config).
pub const MAX_SOURCE_BYTES: u64 = 16 * 1024 * 1024;

/// Read a file as the loaders want it: absent, text, or unreadable. Only a
/// regular file (symlinks followed) of at most [`MAX_SOURCE_BYTES`] is read;
/// a FIFO, socket or device is unreadable, and reading never blocks on one.
pub fn read_file(path: &Path) -> FileText {
    match read_regular(path) {
        Ok(bytes) => FileText::from_bytes(bytes),
        Err(ReadError::Absent) => FileText::Absent,
        Err(ReadError::Unreadable(why)) => FileText::Unreadable(why),
    }
}

enum ReadError {
    Absent,
    Unreadable(String),
}

fn read_regular(path: &Path) -> Result<Vec<u8>, ReadError> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;

    let not_regular = |meta: &std::fs::Metadata| {
        (!meta.is_file()).then(|| ReadError::Unreadable(not_regular_file(meta)))
    };
    // O_NONBLOCK: opening a FIFO for reading would wait for a writer.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path);
    let file = match file {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ReadError::Absent),
        // A path component that is not a directory: the file cannot exist.
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => return Err(ReadError::Absent),
        // A socket cannot be opened (ENXIO): say what it is.
        Err(e) => {
            return Err(std::fs::metadata(path)
                .ok()
                .and_then(|meta| not_regular(&meta))
                .unwrap_or_else(|| ReadError::Unreadable(e.to_string())));
        }
    };
    let meta = file
        .metadata()
        .map_err(|e| ReadError::Unreadable(e.to_string()))?;
    if let Some(error) = not_regular(&meta) {
        return Err(error);
    }
    let too_large = || {
        ReadError::Unreadable(format!(
            "it is larger than the {} MiB limit for a configuration file",
            MAX_SOURCE_BYTES / (1024 * 1024)
        ))
    };
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // Bounded even if the file grows while it is read.
    file.take(MAX_SOURCE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ReadError::Unreadable(e.to_string()))?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Why `meta` (not a regular file) is not read.
fn not_regular_file(meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::FileTypeExt as _;
    let kind = meta.file_type();
    let what = if kind.is_dir() {
        return "it is a directory".to_owned();
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a file"
    };
    format!("it is {what}, not a regular file (only regular files are read)")
}

fn reader() -> impl Fn(&Path) -> FileText {
    |p: &Path| read_file(p)
}

/// Extension directories under `extensions_dir`, in the order of their
/// entries (missing dir → none). An entry installed with `qwen extensions
/// link` holds only its install metadata: its directory is the linked source.
pub fn extension_dirs(extensions_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(extensions_dir) else {
        return Vec::new();
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    entries
        .into_iter()
        .filter_map(|entry| {
            if entry.join("qwen-extension.json").is_file() || is_agent_plugin(&entry) {
                return Some(entry);
            }
            let metadata = std::fs::read(entry.join(".qwen-extension-install.json")).ok()?;
            let metadata: serde_json::Value = serde_json::from_slice(&metadata).ok()?;
            let source = metadata.get("source")?.as_str()?;
            (metadata.get("type")?.as_str()? == "link")
                .then(|| PathBuf::from(source))
                .filter(|dir| dir.join("qwen-extension.json").is_file())
        })
        .collect()
}

/// Whether `dir` holds an Agent Plugins manifest (`plugin.json` with an
/// agent-plugins `$schema`), which Qwen Code reads instead of
/// `qwen-extension.json`.
pub fn is_agent_plugin(dir: &Path) -> bool {
    std::fs::read(dir.join("plugin.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("$schema")?.as_str().map(str::to_owned))
        .is_some_and(|s| s.starts_with(load::AGENT_PLUGIN_SCHEMA_PREFIX))
}

/// The data directory Qwen Code gives an agent plugin (its `PLUGIN_DATA`).
pub fn agent_plugin_data_dir(paths: &Paths, name: &str) -> PathBuf {
    paths
        .home_dir
        .join("extension-store/plugin-data/agent-plugins")
        .join(steward_schema::canonical::sha256_hex(name.as_bytes()))
}

/// Qwen Code's extension activation files under `extensions_dir`.
pub fn activation_files(extensions_dir: &Path) -> ActivationFiles {
    let [enablement, state, preferences] = enablement::activation_paths(extensions_dir);
    let json = |p: &Path| -> Option<serde_json::Value> {
        serde_json::from_slice(&std::fs::read(p).ok()?).ok()
    };
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    ActivationFiles {
        enablement_is_newer: match (modified(&enablement), modified(&state)) {
            (Some(e), Some(s)) => e > s,
            (_, None) => true,
            (None, Some(_)) => false,
        },
        enablement: json(&enablement),
        state: json(&state),
        preferences: json(&preferences),
    }
}

/// Mark a loaded extension inactive, or some of its MCP servers disabled,
/// as Qwen Code's activation files say for this workspace.
fn apply_activation(source: &mut ParsedSource, files: &ActivationFiles, workspace: &Path) {
    if let Content::Extension(e) = &mut source.content {
        let paths = enablement::rule_paths(workspace, workspace);
        e.inactive = !enablement::is_active(&e.name, files, &paths, workspace);
        e.disabled_mcp_servers = enablement::disabled_mcp_servers(&e.name, files);
    }
}

/// Which single source a path is, for loading it alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceRef {
    Settings(SourceKind),
    McpJson,
    LspJson,
    TrustedFolders,
    Approvals,
    SandboxApprovals,
    Extension(PathBuf),
}

/// The file behind a single-file source (an extension: its manifest).
pub fn path_of(which: &SourceRef, paths: &Paths) -> PathBuf {
    match which {
        SourceRef::Settings(SourceKind::SystemDefaults) => paths.system_defaults.clone(),
        SourceRef::Settings(SourceKind::UserSettings) => paths.user_settings.clone(),
        SourceRef::Settings(SourceKind::WorkspaceSettings) => paths.workspace_settings.clone(),
        SourceRef::Settings(_) => paths.system_settings.clone(),
        SourceRef::McpJson => paths.mcp_json.clone(),
        SourceRef::LspJson => paths.lsp_json.clone(),
        SourceRef::TrustedFolders => paths.trusted_folders.clone(),
        SourceRef::Approvals => paths.approvals.clone(),
        SourceRef::SandboxApprovals => paths.sandbox_approvals.clone(),
        SourceRef::Extension(dir) if is_agent_plugin(dir) => dir.join("plugin.json"),
        SourceRef::Extension(dir) => dir.join("qwen-extension.json"),
    }
}

/// Load one source from `text` (the content of [`path_of`]).
pub fn load_text(
    which: &SourceRef,
    paths: &Paths,
    text: &FileText,
    cx: &LoadContext<'_>,
) -> ParsedSource {
    let path = path_of(which, paths);
    match which {
        SourceRef::Settings(kind) => load::load_settings(*kind, &path, text, cx),
        SourceRef::McpJson => load::load_mcp_json(&path, text, cx),
        SourceRef::LspJson => load::load_lsp_json(&path, text, cx),
        SourceRef::TrustedFolders => load::load_trusted_folders(&path, text, cx),
        SourceRef::Approvals => load::load_approvals(&path, text, cx),
        SourceRef::SandboxApprovals => load::load_sandbox_approvals(&path, text, cx),
        SourceRef::Extension(dir) if path.ends_with("plugin.json") => {
            // Its data directory is named after its id, the hash of its name.
            let name = match text {
                FileText::Text(t) => serde_json::from_str::<serde_json::Value>(t)
                    .ok()
                    .and_then(|v| v.get("name")?.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                _ => String::new(),
            };
            let data = agent_plugin_data_dir(paths, &name);
            load::load_agent_plugin(dir, text, &reader(), &data, cx)
        }
        SourceRef::Extension(dir) => load::load_extension(dir, text, &reader(), cx),
    }
}

/// Load one source of the workspace.
pub fn load_one(which: &SourceRef, paths: &Paths, cx: &LoadContext<'_>) -> ParsedSource {
    let mut source = load_text(which, paths, &read_file(&path_of(which, paths)), cx);
    if let SourceRef::Extension(_) = which {
        apply_activation(
            &mut source,
            &activation_files(&paths.extensions_dir),
            &paths.workspace,
        );
    }
    source
}

/// Load every source of the workspace (extensions and `--mcp-config` included).
pub fn load_all(paths: &Paths, mcp_config: &[String], cx: &LoadContext<'_>) -> SourceSet {
    let one = |which: SourceRef| load_one(&which, paths, cx);
    let activation = activation_files(&paths.extensions_dir);
    SourceSet {
        system_defaults: one(SourceRef::Settings(SourceKind::SystemDefaults)),
        user_settings: one(SourceRef::Settings(SourceKind::UserSettings)),
        workspace_settings: one(SourceRef::Settings(SourceKind::WorkspaceSettings)),
        system_settings: one(SourceRef::Settings(SourceKind::SystemSettings)),
        mcp_json: one(SourceRef::McpJson),
        lsp_json: one(SourceRef::LspJson),
        extensions: extension_dirs(&paths.extensions_dir)
            .into_iter()
            .map(|d| {
                let which = SourceRef::Extension(d);
                let mut source = load_text(&which, paths, &read_file(&path_of(&which, paths)), cx);
                apply_activation(&mut source, &activation, &paths.workspace);
                source
            })
            .collect(),
        cli_mcp: mcp_config
            .iter()
            .map(|arg| load::load_cli_mcp_config(arg, &reader(), cx))
            .collect(),
        trusted_folders: one(SourceRef::TrustedFolders),
        approvals: one(SourceRef::Approvals),
        sandbox_approvals: one(SourceRef::SandboxApprovals),
    }
}

/// A context for loading with `mode`.
pub fn context<'a>(
    paths: &'a Paths,
    env: &'a std::collections::BTreeMap<String, String>,
    mode: LoadMode,
) -> LoadContext<'a> {
    LoadContext {
        workspace: &paths.workspace,
        env,
        mode,
        memo: None,
        realpath: resolve_existing,
    }
}

/// Canonicalize a trust-rule path when it exists (symlinks resolved).
pub fn resolve_existing(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The `sources` part of status for one loaded source.
pub fn source_status(source: &ParsedSource) -> SourceStatus {
    SourceStatus {
        kind: source.kind,
        path: source.path.to_string_lossy().into_owned(),
        state: source.state,
        error: source.error_text(),
        diagnostics: source.diagnostics.clone(),
        warnings: source.warnings.clone(),
    }
}

/// Log what a load of `source` found: every error and warning (an entry
/// dropped is a warning line too), so that nothing is dropped silently.
pub fn log_findings(source: &ParsedSource) {
    let path = source.path.display();
    for d in &source.diagnostics {
        tracing::warn!(source = %path, "{d}");
    }
    for d in &source.warnings {
        tracing::warn!(source = %path, "{d}");
    }
    for dropped in &source.dropped {
        tracing::warn!(
            source = %path,
            server = %dropped.name,
            "entry dropped (InvalidSpec): {}",
            dropped.message.lines().next().unwrap_or_default()
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// `read_file` in a thread, so that a read that blocks fails the test.
    fn read_within_deadline(path: &Path) -> FileText {
        let (tx, rx) = mpsc::channel();
        let path = path.to_path_buf();
        std::thread::spawn(move || tx.send(read_file(&path)));
        rx.recv_timeout(Duration::from_secs(10))
            .expect("read_file returned within 10 s")
    }

    fn unreadable(text: &FileText) -> &str {
        match text {
            FileText::Unreadable(why) => why,
            other => panic!("expected unreadable, got {other:?}"),
        }
    }

    #[test]
    fn a_fifo_is_unreadable_and_never_blocks_the_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("settings.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let why = unreadable(&read_within_deadline(&fifo)).to_owned();
        assert!(why.contains("a FIFO, not a regular file"), "{why}");
    }

    #[test]
    fn a_symlink_to_dev_zero_is_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("settings.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let why = unreadable(&read_within_deadline(&link)).to_owned();
        assert!(why.contains("a character device"), "{why}");
    }

    #[test]
    fn a_socket_and_a_directory_are_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.json");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let why = unreadable(&read_within_deadline(&socket)).to_owned();
        assert!(why.contains("a socket"), "{why}");
        let why = unreadable(&read_within_deadline(dir.path())).to_owned();
        assert_eq!(why, "it is a directory");
    }

    #[test]
    fn a_file_over_the_size_cap_is_unreadable_and_one_at_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.json");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(MAX_SOURCE_BYTES + 1).unwrap(); // sparse
        let why = unreadable(&read_within_deadline(&path)).to_owned();
        assert!(why.contains("larger than the 16 MiB limit"), "{why}");
        file.set_len(MAX_SOURCE_BYTES).unwrap();
        assert!(
            matches!(read_within_deadline(&path), FileText::Text(t) if t.len() as u64 == MAX_SOURCE_BYTES)
        );
    }

    #[test]
    fn missing_files_and_missing_parents_are_absent() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        assert_eq!(read_file(&dir.path().join("nope.json")), FileText::Absent);
        std::fs::write(&file, "{}").unwrap();
        assert_eq!(read_file(&file.join("below.json")), FileText::Absent);
        assert_eq!(read_file(&file), FileText::Text("{}".to_owned()));
    }
}

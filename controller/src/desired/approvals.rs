//! The approvals store: recording `steward approve` / `steward reject`
//! decisions in the approvals file (`HOME_DIR/mcpApprovals.json`) so
//! that concurrent writers — two CLIs, a CLI and the agent — lose nothing.
//!
//! A write takes an advisory lock on a sibling `<file>.lock`, reads the
//! current file *under that lock*, merges only the records it changes (every
//! other project's and server's record stays, including records of servers
//! that are no longer configured), and replaces the file atomically: a temp
//! file in the same directory (mode 0600), fsync, rename over the file, fsync
//! the directory. A current file that is not a valid approvals file is never
//! overwritten: the write is refused with the parse error.
//!
//! Reading for admission goes through the ordinary source loader
//! (`steward_schema::load::load_approvals`); this module only writes.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use steward_schema::formats::{ApprovalStatus, SandboxApproval};

use crate::support::fs::{sibling, write_atomically};
use steward_schema::load::{self, FileText, LoadContext, LoadMode};
use steward_schema::resource::SourceState;

/// Why a decision could not be recorded. Messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum ApprovalsError {
    #[error("create the directory {path}: {source}")]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("lock {path}: {source}")]
    Lock { path: PathBuf, source: io::Error },
    #[error("read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error(
        "update {path}: it is not a valid approvals file, so nothing was written (fix or remove it first):\n{error}"
    )]
    Invalid { path: PathBuf, error: String },
    #[error("write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// The lowercase word for a decision (`approved` / `rejected`).
pub fn status_word(status: ApprovalStatus) -> &'static str {
    match status {
        ApprovalStatus::Approved => "approved",
        ApprovalStatus::Rejected => "rejected",
    }
}

/// Record `decisions` — `(server name, approvalHash, status)` — for the
/// canonical workspace root `workspace` in the approvals file at `path`.
/// Creates the file's directory (HOME_DIR) when needed.
pub fn record(
    path: &Path,
    workspace: &Path,
    decisions: &[(String, String, ApprovalStatus)],
) -> Result<(), ApprovalsError> {
    let records = decisions
        .iter()
        .map(|(name, hash, status)| {
            (
                name.clone(),
                serde_json::json!({"hash": hash, "status": status_word(*status)}),
            )
        })
        .collect::<Vec<_>>();
    write_records(path, workspace, load::load_approvals, &records)
}

/// Record, in Steward's own file at `path`
/// (`HOME_DIR/steward/sandbox-approvals.json`), the permission profile each
/// approval of `workspace` was given for: a wider profile asks again.
pub fn record_sandboxes(
    path: &Path,
    workspace: &Path,
    bindings: &[(String, SandboxApproval)],
) -> Result<(), ApprovalsError> {
    let records = bindings
        .iter()
        .map(|(name, b)| (name.clone(), serde_json::to_value(b).unwrap_or_default()))
        .collect::<Vec<_>>();
    write_records(path, workspace, load::load_sandbox_approvals, &records)
}

/// The loader that validates a file before it is rewritten.
type Loader = fn(&Path, &FileText, &LoadContext<'_>) -> steward_schema::load::ParsedSource;

/// Set `records` (server name → record) under the workspace's key of the
/// file at `path`, under its lock, atomically (see the module docs).
fn write_records(
    path: &Path,
    workspace: &Path,
    loader: Loader,
    records: &[(String, Value)],
) -> Result<(), ApprovalsError> {
    // A symlinked approvals file stays a symlink: write where it points.
    let path = match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => fs::canonicalize(path).unwrap_or(path.into()),
        _ => path.to_path_buf(),
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(|source| ApprovalsError::CreateDir {
        path: dir.clone(),
        source,
    })?;

    let lock_path = sibling(&path, ".lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .map_err(|source| ApprovalsError::Lock {
            path: lock_path.clone(),
            source,
        })?;
    lock.lock().map_err(|source| ApprovalsError::Lock {
        path: lock_path.clone(),
        source,
    })?;

    let mut root = read_current(&path, workspace, loader)?;
    merge(&mut root, workspace, records);
    let mut text =
        serde_json::to_string_pretty(&Value::Object(root)).expect("a JSON value always serializes");
    text.push('\n');
    write_atomically(&path, text.as_bytes()).map_err(|source| ApprovalsError::Write {
        path: path.clone(),
        source,
    })?;
    // The lock is released when `lock` is dropped (closing the descriptor).
    drop(lock);
    Ok(())
}

/// The current file as a JSON object (empty when absent). Validated with the
/// same loader admission uses, so a file admission would reject is refused.
fn read_current(
    path: &Path,
    workspace: &Path,
    loader: Loader,
) -> Result<Map<String, Value>, ApprovalsError> {
    // Regular files only, size-capped: never blocks on a FIFO.
    let text = match crate::desired::sources::read_file(path) {
        FileText::Text(text) => text,
        FileText::Absent => return Ok(Map::new()),
        FileText::Unreadable(why) => {
            return Err(ApprovalsError::Read {
                path: path.to_path_buf(),
                source: io::Error::other(why),
            });
        }
        FileText::NotUtf8(pos) => {
            return Err(ApprovalsError::Read {
                path: path.to_path_buf(),
                source: io::Error::other(format!(
                    "it is not UTF-8 text (at {}:{})",
                    pos.line, pos.column
                )),
            });
        }
    };
    let env = BTreeMap::new();
    let cx = LoadContext {
        workspace,
        env: &env,
        mode: LoadMode::Strict,
        memo: None,
        realpath: load::as_written,
    };
    let parsed = loader(path, &FileText::Text(text.clone()), &cx);
    if parsed.state == SourceState::Invalid {
        return Err(ApprovalsError::Invalid {
            path: path.to_path_buf(),
            error: parsed.error_text().unwrap_or_default(),
        });
    }
    // Merge into the document itself (not the typed view) so that keys this
    // version does not know survive the rewrite.
    match steward_schema::jsonc::parse(&text).map(|doc| doc.value) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) | Err(_) => Err(ApprovalsError::Invalid {
            path: path.to_path_buf(),
            error: format!("{}: expected a JSON object", path.display()),
        }),
    }
}

/// Set each record under `root[workspace][name]`, touching nothing else.
fn merge(root: &mut Map<String, Value>, workspace: &Path, records: &[(String, Value)]) {
    let key = workspace.to_string_lossy().into_owned();
    let project = root.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if !project.is_object() {
        *project = Value::Object(Map::new());
    }
    if let Value::Object(project) = project {
        for (name, record) in records {
            project.insert(name.clone(), record.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approve(name: &str, hash: &str) -> (String, String, ApprovalStatus) {
        (name.to_owned(), hash.to_owned(), ApprovalStatus::Approved)
    }

    #[test]
    fn merge_keeps_other_projects_and_servers() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("home").join("mcpApprovals.json");
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(
            &file,
            r#"{
              // another project's decision must survive
              "/other": {"x": {"hash": "h0", "status": "rejected"}},
              "/ws": {"gone": {"hash": "h1", "status": "approved"}}
            }"#,
        )
        .unwrap();
        record(&file, Path::new("/ws"), &[approve("alpha", "h2")]).unwrap();
        let v: Value = serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "/other": {"x": {"hash": "h0", "status": "rejected"}},
                "/ws": {
                    "gone": {"hash": "h1", "status": "approved"},
                    "alpha": {"hash": "h2", "status": "approved"}
                }
            })
        );
    }

    #[test]
    fn creates_home_dir_and_writes_mode_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("new-home").join("mcpApprovals.json");
        record(&file, Path::new("/ws"), &[approve("a", "h")]).unwrap();
        let mode = fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // No temp file is left behind.
        let names: Vec<_> = fs::read_dir(file.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(
            names.iter().all(|n| !n.contains(".tmp.")),
            "leftover temp file: {names:?}"
        );
    }

    #[test]
    fn invalid_file_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mcpApprovals.json");
        for bad in [
            "{ not json",
            r#"{"/ws": {"a": {"hash": 1, "status": "approved"}}}"#,
        ] {
            fs::write(&file, bad).unwrap();
            let err = record(&file, Path::new("/ws"), &[approve("a", "h")]).unwrap_err();
            assert!(matches!(err, ApprovalsError::Invalid { .. }), "{err}");
            assert_eq!(fs::read_to_string(&file).unwrap(), bad);
        }
    }
}

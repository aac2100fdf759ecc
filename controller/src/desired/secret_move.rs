//! `steward secret move`, the writes: the config file with one value
//! replaced by its `${secret:NAME}` reference (planned byte-exactly by
//! `steward_schema::secret_move`; written atomically, its mode kept), and,
//! when the entry is approval-gated and was approved, the approval of the
//! rewritten entry in the approvals file Qwen Code reads — so neither Steward
//! nor Qwen Code asks again.
//!
//! A running controller of the workspace does this itself (a control
//! request), so the two files change in one snapshot and the server, whose
//! effective values are the same, sees no restart and no approval gap.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use steward_schema::formats::ApprovalStatus;
use steward_schema::load::{self, FileText, LoadContext, LoadMode};
use steward_schema::qwen;
use steward_schema::resource::Scope;
use steward_schema::secret_move::{self, Edit, Field, MoveError};

use crate::desired::approvals::{self, ApprovalsError};
use crate::desired::sources::read_file;
use crate::support::fs::write_atomically;
use crate::support::paths::Paths;

/// Why a move could not be made. Messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum MoveFileError {
    #[error("read {}: {why}", path.display())]
    Read { path: PathBuf, why: String },
    #[error("move a value of {}: {source}", path.display())]
    Plan { path: PathBuf, source: MoveError },
    #[error(
        "move {field} of {server}: the value in {} is not the one stored as {name} (the file changed meanwhile); run the command again",
        path.display()
    )]
    Changed {
        path: PathBuf,
        server: String,
        field: String,
        name: String,
    },
    #[error("write {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Approvals(#[from] ApprovalsError),
}

/// What a move did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The rewritten entry was approved again (it was approved before).
    pub approved: bool,
}

/// The move of `field` of `server` out of `file` into secret `name`,
/// planned on the file as it is now.
pub fn plan(file: &Path, server: &str, field: &Field, name: &str) -> Result<Edit, MoveFileError> {
    let text = match read_file(file) {
        FileText::Text(text) => text,
        FileText::Absent => {
            return Err(MoveFileError::Read {
                path: file.to_path_buf(),
                why: "it does not exist".to_owned(),
            });
        }
        FileText::Unreadable(why) => {
            return Err(MoveFileError::Read {
                path: file.to_path_buf(),
                why,
            });
        }
        FileText::NotUtf8(pos) => {
            return Err(MoveFileError::Read {
                path: file.to_path_buf(),
                why: format!("it is not UTF-8 text (at {}:{})", pos.line, pos.column),
            });
        }
    };
    let lsp = file.file_name().is_some_and(|n| n == ".lsp.json");
    secret_move::plan(&text, lsp, server, field, name).map_err(|source| MoveFileError::Plan {
        path: file.to_path_buf(),
        source,
    })
}

/// The approval-gated scope of `file` in the workspace of `paths`, if any.
fn gated_scope(paths: &Paths, file: &Path) -> Option<Scope> {
    let same = |a: &Path, b: &Path| {
        a == b || std::fs::canonicalize(a).ok() == std::fs::canonicalize(b).ok()
    };
    if same(file, &paths.mcp_json) {
        Some(Scope::Project)
    } else if same(file, &paths.workspace_settings)
        && paths.workspace_settings != paths.user_settings
    {
        Some(Scope::Workspace)
    } else {
        None
    }
}

/// Whether (`workspace`, `server`) is approved for `hash` now.
fn approved_for(paths: &Paths, server: &str, hash: &str) -> bool {
    let env = BTreeMap::new();
    let cx = LoadContext {
        workspace: &paths.workspace,
        env: &env,
        mode: LoadMode::Lenient,
        memo: None,
        realpath: load::as_written,
    };
    let parsed = load::load_approvals(&paths.approvals, &read_file(&paths.approvals), &cx);
    let load::Content::Approvals(file) = parsed.content else {
        return false;
    };
    file.get(paths.workspace.to_string_lossy().as_ref())
        .and_then(|records| records.get(server))
        .is_some_and(|r| r.status == ApprovalStatus::Approved && r.hash == hash)
}

/// Writes the move: plans it again on the file as it is, checks the value
/// is `stored` (what was put in the secret), rewrites the file (mode kept)
/// and re-approves an approved gated entry. `env` expands settings entries
/// for their approval hash, as Qwen Code does.
pub fn commit(
    paths: &Paths,
    file: &Path,
    server: &str,
    field: &Field,
    name: &str,
    stored: &str,
    env: &BTreeMap<String, String>,
) -> Result<Moved, MoveFileError> {
    let edit = plan(file, server, field, name)?;
    if edit.value != stored {
        return Err(MoveFileError::Changed {
            path: file.to_path_buf(),
            server: server.to_owned(),
            field: field.to_string(),
            name: name.to_owned(),
        });
    }
    let scope = gated_scope(paths, file);
    let vars = |n: &str| env.get(n).cloned();
    let was_approved = scope.is_some_and(|scope| {
        approved_for(
            paths,
            server,
            &qwen::approval_hash(&edit.before, scope, &vars),
        )
    });
    let mode = std::fs::metadata(file)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o644);
    let write = |e| MoveFileError::Write {
        path: file.to_path_buf(),
        source: e,
    };
    write_atomically(file, edit.text.as_bytes()).map_err(write)?;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(mode)).map_err(write)?;
    if let (true, Some(scope)) = (was_approved, scope) {
        let hash = qwen::approval_hash(&edit.after, scope, &vars);
        approvals::record(
            &paths.approvals,
            &paths.workspace,
            &[(server.to_owned(), hash, ApprovalStatus::Approved)],
        )?;
    }
    Ok(Moved {
        approved: was_approved,
    })
}

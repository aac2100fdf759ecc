//! `filePath` → a file of the workspace: an absolute path, a
//! workspace-relative path or a `file://` URI, refused outside the workspace
//! (lexically or through a symlink) and read; and paths shown to people
//! relative to the workspace.

use std::path::{Path, PathBuf};

use lsp_types::Url;

use super::{Call, Refused};
use crate::gateway::lsp::{LspError, read};

/// A file argument, checked and read.
pub(super) struct Document {
    pub(super) path: PathBuf,
    pub(super) text: String,
}

impl Call<'_> {
    /// `filePath` as a checked absolute path inside the workspace, with its text.
    pub(super) fn document(&self, file: &str) -> Result<Document, Refused> {
        let path = self.resolve(file)?;
        let text = read(&path).map_err(|e| match e {
            LspError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Refused(format!(
                    "{file} does not exist (filePath is absolute or relative to the workspace root {})",
                    self.workspace.display()
                ))
            }
            other => Refused::from(other),
        })?;
        Ok(Document { path, text })
    }

    /// An absolute path, a workspace-relative path or a `file://` URI →
    /// the absolute path, refused when it leaves the workspace (lexically,
    /// or through a symlink).
    fn resolve(&self, file: &str) -> Result<PathBuf, Refused> {
        let given = if file.starts_with("file:") {
            Url::parse(file)
                .ok()
                .and_then(|u| u.to_file_path().ok())
                .ok_or_else(|| Refused(format!("{file} is not a usable file URI")))?
        } else if file.contains("://") {
            return Err(Refused(format!(
                "{file} is not a file of the workspace: the lsp tool reads files only"
            )));
        } else {
            PathBuf::from(file)
        };
        let lexical = steward_schema::load::normalize_lexically(&self.workspace.join(given));
        let outside = || {
            Refused(format!(
                "{file} is outside the workspace {}: the lsp tool only reads files inside it",
                self.workspace.display()
            ))
        };
        if !lexical.starts_with(&self.workspace) {
            return Err(outside());
        }
        match std::fs::canonicalize(&lexical) {
            Ok(real) if real.starts_with(&self.workspace) => Ok(real),
            Ok(real) => Err(Refused(format!(
                "{file} is outside the workspace {}: it resolves to {} (a symlink); the lsp tool only reads files inside it",
                self.workspace.display(),
                real.display()
            ))),
            // Missing: said by the read, with the path as given.
            Err(_) => Ok(lexical),
        }
    }

    /// A path for people: relative to the workspace when inside it.
    pub(super) fn shown(&self, path: &Path) -> String {
        match path.strip_prefix(&self.workspace) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }
}

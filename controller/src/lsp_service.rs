//! Using the language servers: `steward lsp open|hover|definition|references|
//! symbols|diagnostics|request` arrive here through the control socket.
//!
//! This module owns the per-server *document tracking*: which documents were
//! opened through Steward, by server name, independent of any one
//! connection. A restarted server gets `didOpen` replayed for every tracked
//! document (with the file's current text) before its reconcile reports
//! done — including documents opened while the reconcile ran; a failed server
//! keeps its tracking for a later successful start; a removed server's
//! tracking is dropped.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use lsp_types::Url;
use serde_json::{Value, json};
use steward_schema::resource::Phase;

use crate::control::{LspOp, LspQuery};
use crate::runtime::lsp::LspConnection;
use crate::snapshot::{Key, Snapshot};
use crate::status::StatusStore;

/// How long a query waits for its server to become ready.
const READY_WAIT: Duration = Duration::from_secs(15);
/// How long a request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `diagnostics` waits for the server to publish.
const DIAGNOSTICS_WAIT: Duration = Duration::from_secs(5);

/// Ready language-server connections and the documents tracked per server.
#[derive(Default)]
pub struct LspService {
    clients: Mutex<HashMap<String, Arc<LspConnection>>>,
    tracked: Mutex<HashMap<String, BTreeMap<Url, String>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LspService {
    /// A connection became ready: replay the tracked documents, then make it
    /// available to queries. Returns how many documents were replayed.
    pub async fn publish(&self, name: &str, conn: Arc<LspConnection>) -> usize {
        let docs: Vec<(Url, String)> = lock(&self.tracked)
            .get(name)
            .map(|m| m.iter().map(|(u, l)| (u.clone(), l.clone())).collect())
            .unwrap_or_default();
        let mut replayed = 0;
        for (uri, language) in &docs {
            let Ok(path) = uri.to_file_path() else {
                continue;
            };
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            match conn.sync_document(uri.clone(), language, text).await {
                Ok(_) => replayed += 1,
                Err(e) => tracing::warn!(server = name, %uri, %e, "could not replay a document"),
            }
        }
        if replayed > 0 {
            tracing::info!(server = name, documents = replayed, "documents replayed");
        }
        lock(&self.clients).insert(name.to_owned(), conn);
        replayed
    }

    /// The connection is going away (stop, restart, crash).
    pub fn unpublish(&self, name: &str) -> Option<Arc<LspConnection>> {
        lock(&self.clients).remove(name)
    }

    /// `conn` is going away: unpublish it, unless another connection of the
    /// server was published since.
    pub fn unpublish_if(&self, name: &str, conn: &Arc<LspConnection>) {
        let mut clients = lock(&self.clients);
        if clients.get(name).is_some_and(|c| Arc::ptr_eq(c, conn)) {
            clients.remove(name);
        }
    }

    /// The server left the configuration: forget its documents.
    pub fn forget(&self, name: &str) {
        lock(&self.tracked).remove(name);
    }

    async fn client(&self, name: &str, status: &StatusStore) -> Result<Arc<LspConnection>, String> {
        let deadline = tokio::time::Instant::now() + READY_WAIT;
        loop {
            if let Some(c) = lock(&self.clients).get(name).cloned() {
                return Ok(c);
            }
            let phase = status
                .get(&Key::lsp(name))
                .map(|s| (s.phase, s.reason, s.message));
            match phase {
                Some((Phase::Starting | Phase::Pending | Phase::Stopping | Phase::Ready, _, _))
                | None
                    if tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                Some((phase, reason, message)) => {
                    return Err(format!(
                        "use language server \"{name}\": it is {phase:?}{}{}",
                        reason.map(|r| format!(" ({r})")).unwrap_or_default(),
                        message.map(|m| format!(": {m}")).unwrap_or_default()
                    ));
                }
                None => return Err(format!("use language server \"{name}\": it is not running")),
            }
        }
    }

    /// Answer one `steward lsp` query: (server used, result JSON).
    pub async fn query(
        &self,
        snap: &Snapshot,
        status: &StatusStore,
        q: LspQuery,
    ) -> Result<(String, Value), String> {
        let file = q.file.as_deref();
        let (server, language) = choose_server(snap, q.server.as_deref(), file)?;
        let conn = self.client(&server, status).await?;
        if q.op == LspOp::Request {
            let method = q.method.clone().ok_or("send a request: name the method")?;
            if let Some(path) = file {
                self.sync(&server, &conn, path, &language).await?;
            }
            let result = conn
                .request(
                    &method,
                    q.params.clone().unwrap_or(Value::Null),
                    REQUEST_TIMEOUT,
                )
                .await?;
            return Ok((server, result));
        }
        let path = file.ok_or("name a file")?;
        let (uri, version) = self.sync(&server, &conn, path, &language).await?;
        let doc = json!({ "uri": uri });
        let position = || -> Result<Value, String> {
            let (line, character) = position(path, q.line, q.column)?;
            Ok(json!({ "line": line, "character": character }))
        };
        let result = match q.op {
            LspOp::Open => json!({ "uri": uri, "version": version }),
            LspOp::Hover => {
                conn.request(
                    "textDocument/hover",
                    json!({ "textDocument": doc, "position": position()? }),
                    REQUEST_TIMEOUT,
                )
                .await?
            }
            LspOp::Definition => {
                conn.request(
                    "textDocument/definition",
                    json!({ "textDocument": doc, "position": position()? }),
                    REQUEST_TIMEOUT,
                )
                .await?
            }
            LspOp::References => {
                conn.request(
                    "textDocument/references",
                    json!({ "textDocument": doc, "position": position()?,
                            "context": { "includeDeclaration": true } }),
                    REQUEST_TIMEOUT,
                )
                .await?
            }
            LspOp::Symbols => {
                conn.request(
                    "textDocument/documentSymbol",
                    json!({ "textDocument": doc }),
                    REQUEST_TIMEOUT,
                )
                .await?
            }
            LspOp::Diagnostics => {
                let diags = conn
                    .wait_for_diagnostics(&uri, DIAGNOSTICS_WAIT)
                    .await
                    .unwrap_or_default();
                serde_json::to_value(diags).map_err(|e| e.to_string())?
            }
            LspOp::Request => unreachable!("handled above"),
        };
        Ok((server, result))
    }

    /// Open or refresh `path` on `server` and track it.
    async fn sync(
        &self,
        server: &str,
        conn: &LspConnection,
        path: &Path,
        language: &str,
    ) -> Result<(Url, i32), String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
        let uri = Url::from_file_path(path)
            .map_err(|()| format!("make a file URI of {}", path.display()))?;
        lock(&self.tracked)
            .entry(server.to_owned())
            .or_default()
            .insert(uri.clone(), language.to_owned());
        let version = conn.sync_document(uri.clone(), language, text).await?;
        Ok((uri, version))
    }
}

/// Well-known extension → language id, used when `extensionToLanguage` is silent.
fn builtin_language(ext: &str) -> Option<&'static str> {
    Some(match ext {
        ".c" | ".h" => "c",
        ".cc" | ".cpp" | ".cxx" | ".hpp" | ".hh" => "cpp",
        ".py" | ".pyi" => "python",
        ".sh" | ".bash" => "shellscript",
        ".ts" => "typescript",
        ".tsx" => "typescriptreact",
        ".js" | ".mjs" | ".cjs" => "javascript",
        ".jsx" => "javascriptreact",
        ".rs" => "rust",
        ".go" => "go",
        ".java" => "java",
        ".json" => "json",
        ".md" => "markdown",
        _ => return None,
    })
}

/// Pick the server for `file` (or the named one) and the document's language id.
fn choose_server(
    snap: &Snapshot,
    named: Option<&str>,
    file: Option<&Path>,
) -> Result<(String, String), String> {
    let ext = file
        .and_then(|f| f.extension())
        .map(|e| format!(".{}", e.to_string_lossy().to_lowercase()));
    let lsp = &snap.desired.lsp;
    if let Some(name) = named {
        let d = lsp.get(name).ok_or_else(|| {
            format!(
                "use language server \"{name}\": no such server (configured: {})",
                lsp.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        })?;
        let language = ext
            .as_deref()
            .and_then(|e| d.spec.extension_to_language.get(e).cloned())
            .or_else(|| ext.as_deref().and_then(builtin_language).map(str::to_owned))
            .or_else(|| d.spec.languages.first().cloned())
            .unwrap_or_else(|| name.to_owned());
        return Ok((name.to_owned(), language));
    }
    let file = file.ok_or("choose a language server: name a file or --server")?;
    let ext = ext.unwrap_or_default();
    // 1. An explicit extensionToLanguage mapping.
    for (name, d) in lsp {
        if let Some(language) = d.spec.extension_to_language.get(&ext) {
            return Ok((name.clone(), language.clone()));
        }
    }
    // 2. A server whose languages include the extension's usual language.
    if let Some(language) = builtin_language(&ext) {
        for (name, d) in lsp {
            if d.spec.languages.iter().any(|l| l == language) {
                return Ok((name.clone(), language.to_owned()));
            }
        }
    }
    Err(format!(
        "find a language server for {}: no server handles \"{ext}\" files (set extensionToLanguage in .lsp.json)",
        file.display()
    ))
}

/// 1-based LINE:COL (characters) → 0-based LSP position (UTF-16 units).
fn position(path: &Path, line: Option<u32>, column: Option<u32>) -> Result<(u32, u32), String> {
    let (Some(line), Some(column)) = (line, column) else {
        return Err("give a position as FILE:LINE:COL".to_owned());
    };
    if line == 0 || column == 0 {
        return Err("LINE and COL are 1-based".to_owned());
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    let Some(line_text) = text.split('\n').nth(line as usize - 1) else {
        return Err(format!("{}: has no line {line}", path.display()));
    };
    let units: usize = line_text
        .chars()
        .take(column as usize - 1)
        .map(char::len_utf16)
        .sum();
    Ok((line - 1, units as u32))
}

/// Parse `FILE[:LINE:COL]` (1-based, like compiler output).
pub fn parse_location(arg: &str) -> (PathBuf, Option<u32>, Option<u32>) {
    let mut parts = arg.rsplitn(3, ':');
    let last = parts.next();
    let mid = parts.next();
    let rest = parts.next();
    match (rest, mid, last) {
        (Some(file), Some(l), Some(c)) => match (l.parse(), c.parse()) {
            (Ok(l), Ok(c)) => (PathBuf::from(file), Some(l), Some(c)),
            _ => (PathBuf::from(arg), None, None),
        },
        _ => (PathBuf::from(arg), None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_like_compiler_output() {
        assert_eq!(
            parse_location("src/a.py:3:7"),
            (PathBuf::from("src/a.py"), Some(3), Some(7))
        );
        assert_eq!(parse_location("a.py"), (PathBuf::from("a.py"), None, None));
        assert_eq!(
            parse_location("C:weird:name.py"),
            (PathBuf::from("C:weird:name.py"), None, None)
        );
    }

    #[test]
    fn positions_count_utf16_units() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.txt");
        std::fs::write(&f, "first\na😀b\n").unwrap();
        assert_eq!(position(&f, Some(2), Some(3)).unwrap(), (1, 3));
        assert_eq!(position(&f, Some(1), Some(1)).unwrap(), (0, 0));
        assert!(position(&f, Some(9), Some(1)).is_err());
        assert!(position(&f, Some(0), Some(1)).is_err());
    }
}

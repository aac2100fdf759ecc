//! Using the language servers: `steward lsp open|hover|definition|references|
//! symbols|diagnostics|request` (through the control socket) and the agent
//! endpoint's `lsp` tool (`gateway::lsp_tool`) both arrive here.
//!
//! This module owns three things every use shares:
//!
//! - **Server choice**: the server named, else the one whose
//!   `extensionToLanguage` maps the file's extension (a Ready one first),
//!   else one whose `languages` include the extension's usual language.
//! - **Waiting for a server**: a use of a server that is starting or
//!   restarting waits for its connection (bounded by its own shutdown and
//!   startup timeouts); one that cannot run fails at once with its status
//!   (a crash gets a moment first: `restartOnCrash` restarts at once). A use
//!   whose connection closes or is replaced under it (a crash, a restart)
//!   runs once more on the next one ([`LspService::with_connection`]).
//! - **Waiting for indexing**: a query to a server that reports work-done
//!   progress it has not ended (indexing, loading the project) waits for the
//!   end, bounded by the server's `startupTimeout`, and then fails with
//!   `still indexing (NAME: 40 %)` rather than answer with what may be an
//!   empty or partial result ([`LspService::until_indexed`]).
//! - **Document tracking**: which documents were opened through Steward, by
//!   server name, independent of any one connection. A restarted server gets
//!   `didOpen` replayed for every tracked document (with the file's current
//!   text) before its reconcile reports done — including documents opened
//!   while the reconcile ran; a failed server keeps its tracking for a later
//!   successful start; a removed server's tracking is dropped.

mod query;
pub use query::{LspOp, LspQuery};

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lsp_types::Url;
use serde_json::{Value, json};
use steward_schema::load::DEFAULT_STARTUP_TIMEOUT_MS;
use steward_schema::resource::{Phase, Reason, ServerStatus};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::desired::snapshot::{Key, Snapshot};
use crate::gateway::registry::Registry;
use crate::observe::status::StatusStore;
use crate::runtime::lsp::{LspConnection, LspRequestError, OPEN_DELAY, Progress};
use crate::support::sync::lock;

/// Added to a server's shutdown + startup timeouts for how long a use waits
/// for it (the reconcile has to get to it, and replay documents).
const READY_MARGIN: Duration = Duration::from_secs(5);
/// How long a crashed server may stay `Failed` before a use waiting for it
/// calls the crash final (a restart on crash begins at once).
const CRASH_SETTLE: Duration = Duration::from_secs(2);
/// How long a request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `diagnostics` waits for the server to publish.
pub const DIAGNOSTICS_WAIT: Duration = Duration::from_secs(5);

/// Why a language server could not be used. Messages read after "failed to".
#[derive(Debug, thiserror::Error)]
pub enum LspError {
    #[error("use a language server: they are disabled for this controller (--no-lsp)")]
    Disabled,
    #[error("choose a language server: name a file or a server")]
    NoTarget,
    #[error(
        "find a language server for {}: no server handles \"{ext}\" files (map the extension in extensionToLanguage of .lsp.json, or name a server)",
        file.display()
    )]
    NoServerFor { file: PathBuf, ext: String },
    #[error("use language server \"{name}\": no such server (configured: {configured})")]
    UnknownServer { name: String, configured: String },
    /// Its status says it cannot serve now (Failed or Blocked).
    #[error(
        "use language server \"{name}\": it is {:?}{}{}",
        status.phase,
        status.reason.map(|r| format!(" ({r})")).unwrap_or_default(),
        status.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
    )]
    Unavailable {
        name: String,
        status: Box<ServerStatus>,
    },
    /// Not admitted (no status written yet).
    #[error("use language server \"{name}\": it is blocked ({reason}): {message}")]
    Blocked {
        name: String,
        reason: Reason,
        message: String,
    },
    #[error("use language server \"{name}\": it did not become ready within {}", humantime::format_duration(*waited))]
    NotReadyInTime { name: String, waited: Duration },
    /// Its work-done progress (indexing) did not end within `waited`.
    #[error(
        "use language server \"{name}\": {}; it did not finish within {}",
        still_indexing(name, progress),
        humantime::format_duration(*waited)
    )]
    StillIndexing {
        name: String,
        progress: Progress,
        waited: Duration,
    },
    #[error("read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("find line {line} in {}: it has {lines} lines", path.display())]
    NoSuchLine {
        path: PathBuf,
        line: u32,
        lines: usize,
    },
    #[error("make a file URI of {}", .0.display())]
    Uri(PathBuf),
    /// The connection refused or failed a message (phrased by the runtime).
    #[error("{0}")]
    Protocol(LspRequestError),
    #[error("{0}")]
    Usage(String),
}

/// The server a use goes to, and the document's language id there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub server: String,
    pub language: String,
}

/// A document brought up to date on a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synced {
    pub uri: Url,
    pub version: i32,
    /// First opened on this server just now (it may still be analysing it).
    pub fresh: bool,
}

/// Ready language-server connections and the documents tracked per server.
/// The one owner of which language servers are ready: the registry's `lsp`
/// flag (whether the agent endpoint lists the `lsp` tool) follows it.
pub struct LspService {
    clients: Mutex<HashMap<String, Arc<LspConnection>>>,
    registry: Arc<Registry>,
    tracked: Mutex<HashMap<String, BTreeMap<Url, String>>>,
    /// Bumped whenever `clients` changes: wakes uses waiting for a server.
    changes: watch::Sender<u64>,
}

impl Default for LspService {
    fn default() -> Self {
        LspService::new(Arc::new(Registry::default()))
    }
}

impl LspService {
    /// A service whose ready servers `registry` follows.
    pub fn new(registry: Arc<Registry>) -> Self {
        LspService {
            clients: Mutex::default(),
            registry,
            tracked: Mutex::default(),
            changes: watch::Sender::new(0),
        }
    }

    /// A connection became ready: replay the tracked documents, then make it
    /// available to queries. Returns how many documents were replayed.
    ///
    /// Every `didOpen` goes out at once and the open delay is waited once
    /// for all of them, so a restart costs one delay, not one per document.
    pub async fn publish(&self, name: &str, conn: Arc<LspConnection>) -> usize {
        let docs = self.tracked(name);
        let (mut replayed, mut opened) = (0, false);
        for (uri, language) in &docs {
            let Ok(path) = uri.to_file_path() else {
                continue;
            };
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            match conn.send_document(uri.clone(), language, text) {
                Ok((_, fresh)) => {
                    replayed += 1;
                    opened |= fresh;
                }
                Err(e) => tracing::warn!(server = name, %uri, %e, "could not replay a document"),
            }
        }
        if opened {
            tokio::time::sleep(OPEN_DELAY).await;
        }
        if replayed > 0 {
            tracing::info!(server = name, documents = replayed, "documents replayed");
        }
        let mut clients = lock(&self.clients);
        clients.insert(name.to_owned(), conn);
        self.changed(&clients);
        replayed
    }

    /// Tells the registry and the waiting uses; called with the clients
    /// locked, so the registry's flag follows every change in order.
    fn changed(&self, clients: &HashMap<String, Arc<LspConnection>>) {
        self.registry.set_lsp_available(!clients.is_empty());
        self.changes.send_modify(|n| *n += 1);
    }

    /// The connection is going away (stop, restart, crash).
    pub fn unpublish(&self, name: &str) -> Option<Arc<LspConnection>> {
        let mut clients = lock(&self.clients);
        let gone = clients.remove(name);
        self.changed(&clients);
        gone
    }

    /// `conn` is going away: unpublish it, unless another connection of the
    /// server was published since.
    pub fn unpublish_if(&self, name: &str, conn: &Arc<LspConnection>) {
        let mut clients = lock(&self.clients);
        let ours = clients.get(name).is_some_and(|c| Arc::ptr_eq(c, conn));
        if ours && clients.remove(name).is_some() {
            self.changed(&clients);
        }
    }

    /// The server left the configuration: forget its documents.
    pub fn forget(&self, name: &str) {
        lock(&self.tracked).remove(name);
    }

    /// The documents tracked for `server`: (URI, language id).
    pub fn tracked(&self, server: &str) -> Vec<(Url, String)> {
        lock(&self.tracked)
            .get(server)
            .map(|m| m.iter().map(|(u, l)| (u.clone(), l.clone())).collect())
            .unwrap_or_default()
    }

    /// The Ready servers, by name.
    pub fn ready(&self) -> Vec<(String, Arc<LspConnection>)> {
        let mut all: Vec<_> = lock(&self.clients)
            .iter()
            .map(|(n, c)| (n.clone(), c.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    fn current(&self, name: &str) -> Option<Arc<LspConnection>> {
        lock(&self.clients).get(name).cloned()
    }

    /// The live connection of `name`, waiting while it starts or restarts
    /// (bounded by its shutdown + startup timeouts); an error at once when
    /// its status says it cannot run.
    pub async fn connection(
        &self,
        snap: &Snapshot,
        status: &StatusStore,
        name: &str,
    ) -> Result<Arc<LspConnection>, LspError> {
        self.connection_other_than(snap, status, name, None).await
    }

    /// [`connection`](Self::connection), but one other than `old` (which
    /// died or is being replaced).
    async fn connection_other_than(
        &self,
        snap: &Snapshot,
        status: &StatusStore,
        name: &str,
        old: Option<&Arc<LspConnection>>,
    ) -> Result<Arc<LspConnection>, LspError> {
        let key = Key::lsp(name);
        let waited = snap.desired.lsp.get(name).map_or(READY_MARGIN, |d| {
            Duration::from_millis(d.spec.startup_timeout + d.spec.shutdown_timeout) + READY_MARGIN
        });
        let deadline = Instant::now() + waited;
        let mut published = self.changes.subscribe();
        let mut statuses = status.subscribe();
        let mut settle: Option<Instant> = None;
        loop {
            published.borrow_and_update();
            statuses.borrow_and_update();
            if let Some(conn) = self.current(name)
                && old.is_none_or(|old| !Arc::ptr_eq(old, &conn))
            {
                return Ok(conn);
            }
            let mut wake = deadline;
            match status.get(&key) {
                Some(s) if matches!(s.phase, Phase::Failed | Phase::Blocked) => {
                    // A crash is followed at once by a restart when the
                    // server has restartOnCrash: give the controller a
                    // moment to begin it before calling the crash final.
                    let crashed = s.phase == Phase::Failed && s.reason == Some(Reason::Crashed);
                    let until = *settle.get_or_insert_with(|| Instant::now() + CRASH_SETTLE);
                    if !crashed || Instant::now() >= until {
                        return Err(LspError::Unavailable {
                            name: name.to_owned(),
                            status: Box::new(s),
                        });
                    }
                    wake = wake.min(until);
                }
                Some(_) => settle = None,
                None => {
                    if let Some(b) = snap.blocked(&key) {
                        return Err(LspError::Blocked {
                            name: name.to_owned(),
                            reason: b.reason,
                            message: b.message.clone(),
                        });
                    }
                }
            }
            let gone = || LspError::NotReadyInTime {
                name: name.to_owned(),
                waited,
            };
            tokio::select! {
                () = tokio::time::sleep_until(wake) => if Instant::now() >= deadline {
                    return Err(gone());
                },
                changed = published.changed() => if changed.is_err() { return Err(gone()) },
                changed = statuses.changed() => if changed.is_err() { return Err(gone()) },
            }
        }
    }

    /// Run `use_it` on the live connection of `name` (waiting for it as
    /// [`connection`](Self::connection) does). When it fails because the
    /// connection closed or a restart replaced it under the use, run it once
    /// more on the next one: a restart is never the caller's problem.
    ///
    /// Before `use_it` asks a connection anything, its server's indexing is
    /// waited for ([`until_indexed`](Self::until_indexed)).
    pub async fn with_connection<T, F, Fut>(
        &self,
        snap: &Snapshot,
        status: &StatusStore,
        name: &str,
        use_it: F,
    ) -> Result<T, LspError>
    where
        F: Fn(Arc<LspConnection>) -> Fut,
        Fut: Future<Output = Result<T, LspError>>,
    {
        self.use_connection(snap, status, name, true, use_it).await
    }

    /// [`with_connection`](Self::with_connection); `indexed`: wait for the
    /// server's indexing first (a use that asks nothing need not).
    async fn use_connection<T, F, Fut>(
        &self,
        snap: &Snapshot,
        status: &StatusStore,
        name: &str,
        indexed: bool,
        use_it: F,
    ) -> Result<T, LspError>
    where
        F: Fn(Arc<LspConnection>) -> Fut,
        Fut: Future<Output = Result<T, LspError>>,
    {
        let ready = async |conn: Arc<LspConnection>| {
            if indexed {
                self.until_indexed(snap, name, &conn).await?;
            }
            Ok::<_, LspError>(conn)
        };
        let conn = ready(self.connection(snap, status, name).await?).await?;
        match use_it(conn.clone()).await {
            Err(LspError::Protocol(e))
                if matches!(e, LspRequestError::Closed { .. })
                    || self
                        .current(name)
                        .is_none_or(|now| !Arc::ptr_eq(&now, &conn)) =>
            {
                tracing::debug!(server = name, %e, "the connection went away during a use; once more on the next one");
                let next = self
                    .connection_other_than(snap, status, name, Some(&conn))
                    .await?;
                use_it(ready(next).await?).await
            }
            other => other,
        }
    }

    /// Waits while `conn`'s server reports work-done progress it has not
    /// ended, at most the server's `startupTimeout` (how long it may take to
    /// come up is how long a query waits for it to be useful); then
    /// [`LspError::StillIndexing`]. A closed connection has none: the use
    /// goes on and fails (or moves to the next connection) as usual.
    ///
    /// Every query waits, even one that might already be answered well:
    /// during indexing an answer can be non-empty and still partial
    /// (findReferences, workspaceSymbol, incomingCalls list what is indexed
    /// so far) with nothing to mark it so. Waiting first is the one rule
    /// that is truthful for every operation, and free once indexing is done.
    pub async fn until_indexed(
        &self,
        snap: &Snapshot,
        name: &str,
        conn: &LspConnection,
    ) -> Result<(), LspError> {
        let Some(progress) = conn.progress() else {
            return Ok(());
        };
        let waited = Duration::from_millis(
            snap.desired
                .lsp
                .get(name)
                .map_or(DEFAULT_STARTUP_TIMEOUT_MS, |d| d.spec.startup_timeout),
        );
        tracing::debug!(server = name, title = %progress.title, percentage = ?progress.percentage, "waiting for the server's work in progress to end");
        conn.wait_for_progress_end(waited)
            .await
            .map_err(|progress| LspError::StillIndexing {
                name: name.to_owned(),
                progress,
                waited,
            })
    }

    /// The server for `file` (or the named one) and the document's language
    /// id (see the module doc).
    pub fn route(
        &self,
        snap: &Snapshot,
        named: Option<&str>,
        file: Option<&Path>,
    ) -> Result<Route, LspError> {
        if !snap.desired.lsp_enabled {
            return Err(LspError::Disabled);
        }
        let ext = file
            .and_then(|f| f.extension())
            .map(|e| format!(".{}", e.to_string_lossy().to_lowercase()));
        let lsp = &snap.desired.lsp;
        if let Some(name) = named {
            let d = lsp.get(name).ok_or_else(|| LspError::UnknownServer {
                name: name.to_owned(),
                configured: lsp.keys().cloned().collect::<Vec<_>>().join(", "),
            })?;
            let language = ext
                .as_deref()
                .and_then(|e| d.spec.extension_to_language.get(e).cloned())
                .or_else(|| ext.as_deref().and_then(builtin_language).map(str::to_owned))
                .or_else(|| d.spec.languages.first().cloned())
                .unwrap_or_else(|| name.to_owned());
            return Ok(Route {
                server: name.to_owned(),
                language,
            });
        }
        let file = file.ok_or(LspError::NoTarget)?;
        let ext = ext.unwrap_or_default();
        // 1. An explicit extensionToLanguage mapping; a Ready server first.
        let mapped: Vec<Route> = lsp
            .iter()
            .filter_map(|(name, d)| {
                d.spec
                    .extension_to_language
                    .get(&ext)
                    .map(|language| Route {
                        server: name.clone(),
                        language: language.clone(),
                    })
            })
            .collect();
        let ready = lock(&self.clients);
        if let Some(route) = mapped
            .iter()
            .find(|r| ready.contains_key(&r.server))
            .or_else(|| mapped.first())
        {
            return Ok(route.clone());
        }
        drop(ready);
        // 2. A server whose languages include the extension's usual language.
        if let Some(language) = builtin_language(&ext) {
            for (name, d) in lsp {
                if d.spec.languages.iter().any(|l| l == language) {
                    return Ok(Route {
                        server: name.clone(),
                        language: language.to_owned(),
                    });
                }
            }
        }
        Err(LspError::NoServerFor {
            file: file.to_owned(),
            ext,
        })
    }

    /// Open or refresh `path` (with `text`, its current content) on
    /// `server`'s connection and track it.
    pub async fn open(
        &self,
        server: &str,
        conn: &LspConnection,
        path: &Path,
        language: &str,
        text: String,
    ) -> Result<Synced, LspError> {
        let uri = Url::from_file_path(path).map_err(|()| LspError::Uri(path.to_owned()))?;
        let fresh = lock(&self.tracked)
            .entry(server.to_owned())
            .or_default()
            .insert(uri.clone(), language.to_owned())
            .is_none();
        let version = conn
            .sync_document(uri.clone(), language, text)
            .await
            .map_err(LspError::Protocol)?;
        Ok(Synced {
            uri,
            version,
            fresh,
        })
    }

    /// Answer one `steward lsp` query: (server used, result JSON).
    pub async fn query(
        &self,
        snap: &Snapshot,
        status: &StatusStore,
        q: LspQuery,
    ) -> Result<(String, Value), String> {
        let route = self
            .route(snap, q.server.as_deref(), q.file.as_deref())
            .map_err(|e| e.to_string())?;
        let (route_ref, q) = (&route, &q);
        // Opening a document asks the server nothing.
        let indexed = q.op != LspOp::Open;
        let result = self
            .use_connection(snap, status, &route.server, indexed, |conn| async move {
                self.answer(route_ref, &conn, q).await
            })
            .await
            .map_err(|e| e.to_string())?;
        Ok((route.server, result))
    }

    async fn answer(
        &self,
        route: &Route,
        conn: &LspConnection,
        q: &LspQuery,
    ) -> Result<Value, LspError> {
        let request = async |method: &str, params: Value| {
            conn.request(method, params, REQUEST_TIMEOUT)
                .await
                .map_err(LspError::Protocol)
        };
        let file = q.file.as_deref();
        if q.op == LspOp::Request {
            let method = q
                .method
                .clone()
                .ok_or_else(|| LspError::Usage("send a request: name the method".to_owned()))?;
            if let Some(path) = file {
                let text = read(path)?;
                self.open(&route.server, conn, path, &route.language, text)
                    .await?;
            }
            return request(&method, q.params.clone().unwrap_or(Value::Null)).await;
        }
        let path = file.ok_or(LspError::NoTarget)?;
        let text = read(path)?;
        let Synced { uri, version, .. } = self
            .open(&route.server, conn, path, &route.language, text.clone())
            .await?;
        let doc = json!({ "uri": uri });
        let position = || -> Result<Value, LspError> {
            let (Some(line), Some(column)) = (q.line, q.column) else {
                return Err(LspError::Usage(
                    "give a position as FILE:LINE:COL".to_owned(),
                ));
            };
            let (line, character) = to_lsp_position(path, &text, line, column)?;
            Ok(json!({ "line": line, "character": character }))
        };
        Ok(match q.op {
            LspOp::Open => json!({ "uri": uri, "version": version }),
            LspOp::Hover => {
                request(
                    "textDocument/hover",
                    json!({ "textDocument": doc, "position": position()? }),
                )
                .await?
            }
            LspOp::Definition => {
                request(
                    "textDocument/definition",
                    json!({ "textDocument": doc, "position": position()? }),
                )
                .await?
            }
            LspOp::References => {
                request(
                    "textDocument/references",
                    json!({ "textDocument": doc, "position": position()?,
                            "context": { "includeDeclaration": true } }),
                )
                .await?
            }
            LspOp::Symbols => {
                request(
                    "textDocument/documentSymbol",
                    json!({ "textDocument": doc }),
                )
                .await?
            }
            LspOp::Diagnostics => {
                let diags = conn
                    .wait_for_diagnostics(&uri, DIAGNOSTICS_WAIT)
                    .await
                    .unwrap_or_default();
                serde_json::to_value(diags).unwrap_or_default()
            }
            LspOp::Request => unreachable!("handled above"),
        })
    }
}

/// `still indexing (NAME: 40 %)`: the server's percentage when it reports
/// one, else the progress's title and message.
pub fn still_indexing(name: &str, progress: &Progress) -> String {
    let what = match progress.percentage {
        Some(percentage) => format!("{percentage} %"),
        None => [Some(progress.title.as_str()), progress.message.as_deref()]
            .into_iter()
            .flatten()
            .map(str::trim)
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
    };
    if what.is_empty() {
        format!("still indexing ({name})")
    } else {
        format!("still indexing ({name}: {what})")
    }
}

/// The text of `path`.
pub fn read(path: &Path) -> Result<String, LspError> {
    std::fs::read_to_string(path).map_err(|source| LspError::Read {
        path: path.to_owned(),
        source,
    })
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

/// 1-based LINE:COL (characters) of `text` → 0-based LSP position (UTF-16
/// units). A column past the end of its line is the line's end.
pub fn to_lsp_position(
    path: &Path,
    text: &str,
    line: u32,
    column: u32,
) -> Result<(u32, u32), LspError> {
    if line == 0 || column == 0 {
        return Err(LspError::Usage(
            "read the position: LINE and COL count from 1".to_owned(),
        ));
    }
    let Some(line_text) = text.split('\n').nth(line as usize - 1) else {
        return Err(LspError::NoSuchLine {
            path: path.to_owned(),
            line,
            lines: text.split('\n').count(),
        });
    };
    let units: usize = line_text
        .chars()
        .take(column as usize - 1)
        .map(char::len_utf16)
        .sum();
    Ok((line - 1, units as u32))
}

/// 0-based LSP `character` (UTF-16 units) on `line_text` → 1-based column
/// in characters.
pub fn column_of(line_text: &str, character: u32) -> u32 {
    let mut units = 0;
    let mut column = 1;
    for c in line_text.chars() {
        if units >= character as usize {
            break;
        }
        units += c.len_utf16();
        column += 1;
    }
    column
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
        let f = Path::new("x.txt");
        let text = "first\na😀b\n";
        assert_eq!(to_lsp_position(f, text, 2, 3).unwrap(), (1, 3));
        assert_eq!(to_lsp_position(f, text, 1, 1).unwrap(), (0, 0));
        assert!(to_lsp_position(f, text, 9, 1).is_err());
        assert!(to_lsp_position(f, text, 0, 1).is_err());
    }

    #[test]
    fn still_indexing_shows_the_percentage_else_the_title_and_message() {
        let progress = |title: &str, message: Option<&str>, percentage| Progress {
            title: title.to_owned(),
            message: message.map(str::to_owned),
            percentage,
        };
        assert_eq!(
            still_indexing("pyright", &progress("indexing", Some("4/10"), Some(40))),
            "still indexing (pyright: 40 %)"
        );
        assert_eq!(
            still_indexing("clangd", &progress("indexing", Some("4/10"), None)),
            "still indexing (clangd: indexing 4/10)"
        );
        assert_eq!(
            still_indexing("ra", &progress("Roots Scanned", None, None)),
            "still indexing (ra: Roots Scanned)"
        );
        assert_eq!(
            still_indexing("x", &progress(" ", Some(""), None)),
            "still indexing (x)"
        );
    }

    #[test]
    fn columns_count_characters_back_from_utf16_units() {
        assert_eq!(column_of("a😀b", 0), 1);
        assert_eq!(column_of("a😀b", 1), 2);
        assert_eq!(column_of("a😀b", 3), 3, "past the surrogate pair");
        assert_eq!(column_of("ab", 9), 3, "past the end: one after the last");
    }
}

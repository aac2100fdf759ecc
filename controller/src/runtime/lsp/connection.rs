//! [`LspConnection`]: one established session with one language server
//! (and, when Steward started it, the process behind it) — documents,
//! diagnostics, work-done progress and requests on it, and the orderly
//! stop: `shutdown`, `exit` to a server Steward owns, the connection closed,
//! the process stopped.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_lsp::ServerSocket;
use lsp_types::Url;
use lsp_types::notification::Exit;
use serde_json::Value;
use steward_schema::resource::LspServerSpec;
use tokio::time::Instant;

use super::client::Stop;
use super::errors::{LspRequestError, describe};
use super::handshake::open;
use super::progress::Progress;
use super::raw;
use super::session::{Shared, Tasks};
use super::{LspEventHandler, OPEN_DELAY};
use crate::runtime::process::{ManagedProcess, Spawner};
use crate::runtime::start::StartError;
use crate::support::sync::lock;

/// How long closing the connection (flushing the last message) may take.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// One established LSP session (and, when Steward started it, the process
/// behind it).
pub struct LspConnection {
    name: String,
    socket: ServerSocket,
    capabilities: Value,
    shutdown_timeout: Duration,
    shared: Arc<Shared>,
    /// Declared before `process`: the connection closes before the kill.
    tasks: Mutex<Tasks>,
    /// Taken by [`LspConnection::stop`], which may run while queries still
    /// hold the connection (they fail once it is closed).
    process: Mutex<Option<ManagedProcess>>,
    pid: Option<u32>,
}

impl fmt::Debug for LspConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LspConnection")
            .field("name", &self.name)
            .field("pid", &self.pid())
            .field("open_documents", &lock(&self.shared.store).open_count())
            .finish_non_exhaustive()
    }
}

impl LspConnection {
    /// Spawns the server when `spec.command` is set (and then owns it),
    /// connects (stdio pipes; tcp `socket.host:port` or the unix
    /// `socket.path`, retried every 250 ms growing to 1 s while a server
    /// Steward started comes up), then `initialize` / `initialized` /
    /// `workspace/didChangeConfiguration`; all within `spec.startupTimeout`.
    ///
    /// `on_event` is only called for what happens after this returns `Ok` (on
    /// a multi-threaded runtime the first call may race with the caller
    /// receiving it: treat an event as "look at this server again").
    pub async fn connect(
        spawner: &Spawner,
        name: &str,
        spec: &LspServerSpec,
        on_event: LspEventHandler,
    ) -> Result<LspConnection, StartError> {
        let started = Instant::now();
        let result = open(spawner, name, spec, on_event)
            .await
            .map(|opened| LspConnection {
                name: name.to_owned(),
                socket: opened.socket,
                capabilities: opened.capabilities,
                shutdown_timeout: Duration::from_millis(spec.shutdown_timeout),
                shared: opened.shared,
                tasks: Mutex::new(opened.tasks),
                pid: opened.process.as_ref().map(ManagedProcess::pid),
                process: Mutex::new(opened.process),
            });
        match &result {
            Ok(connection) => tracing::info!(
                server = %name,
                pid = connection.pid(),
                transport = ?spec.transport,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "language server connected"
            ),
            Err(error) => tracing::info!(
                server = %name,
                reason = %error.reason,
                error = %crate::runtime::first_line(&error.message),
                "language server failed to start"
            ),
        }
        result
    }

    /// The pid of the server Steward started (`None` for an external daemon).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The `ServerCapabilities` from the `initialize` answer, as the server
    /// sent them (for `status.capabilities`).
    pub fn capabilities(&self) -> Value {
        self.capabilities.clone()
    }

    /// The sandbox of the server Steward started, as status shows it.
    pub fn sandbox(&self) -> Option<crate::runtime::sandbox::SandboxStatus> {
        lock(&self.process)
            .as_ref()
            .and_then(|process| process.sandbox().map(|s| s.status()))
    }

    /// The code-running files the server could create (absent when it
    /// started): watched for.
    pub fn unpinned(&self) -> Vec<std::path::PathBuf> {
        lock(&self.process)
            .as_ref()
            .and_then(|process| process.sandbox().map(|s| s.report.unpinned.clone()))
            .unwrap_or_default()
    }

    /// The last `n` stderr lines of the server Steward started, oldest first.
    pub fn stderr_tail(&self, n: usize) -> Vec<String> {
        lock(&self.process)
            .as_ref()
            .map(|process| process.stderr_tail(n))
            .unwrap_or_default()
    }

    /// Brings the server's copy of a document up to `text`: `didOpen` (then
    /// [`OPEN_DELAY`]) if it is not open yet; `didChange` with the full text
    /// and the next version if it is open with other text; nothing if the
    /// text is what was sent last. Returns the document's version. A new
    /// `language_id` reopens the document (it can only be set at open).
    pub async fn sync_document(
        &self,
        uri: Url,
        language_id: &str,
        text: String,
    ) -> Result<i32, LspRequestError> {
        let (version, opened) = self.send_document(uri, language_id, text)?;
        if opened {
            tokio::time::sleep(OPEN_DELAY).await;
        }
        Ok(version)
    }

    /// [`sync_document`](Self::sync_document) without the wait: returns the
    /// version and whether `didOpen` was sent, so a caller opening many
    /// documents (a replay after a restart) waits [`OPEN_DELAY`] once.
    pub fn send_document(
        &self,
        uri: Url,
        language_id: &str,
        text: String,
    ) -> Result<(i32, bool), LspRequestError> {
        // Decided and sent under the lock, so versions go out in order.
        lock(&self.shared.store).send_document(&self.socket, uri, language_id, text)
    }

    /// The documents opened through this connection: `(uri, language id,
    /// text)`, for replay after a restart.
    pub fn open_documents(&self) -> Vec<(Url, String, String)> {
        lock(&self.shared.store).open_documents()
    }

    /// `didClose` for a document opened through this connection (nothing
    /// otherwise).
    pub async fn close_document(&self, uri: &Url) {
        let closed = lock(&self.shared.store).close_document(&self.socket, uri);
        if closed.is_err() {
            tracing::debug!(server = %self.name, %uri, "didClose not sent: the connection is closed");
        }
    }

    /// Sends a request (`textDocument/hover`, `textDocument/definition`,
    /// `textDocument/references`, `textDocument/documentSymbol`, or any other
    /// standard LSP request by its method) and returns the raw result,
    /// bounded by `timeout`. The lifecycle requests (`initialize`,
    /// `shutdown`) are the connection's own and are refused.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, LspRequestError> {
        let refused = |why| LspRequestError::Refused {
            method: method.to_owned(),
            why,
        };
        if method == "initialize" || method == "shutdown" {
            return Err(refused("the connection handles the lifecycle itself"));
        }
        let Some(answer) = raw::request(&self.socket, method, params) else {
            return Err(refused("the request cannot be encoded"));
        };
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(LspRequestError::of_answer(method, error)),
            Err(_) => Err(LspRequestError::Timeout {
                method: method.to_owned(),
                timeout,
            }),
        }
    }

    /// The diagnostics the server last published for `uri`.
    pub fn diagnostics(&self, uri: &Url) -> Option<Vec<lsp_types::Diagnostic>> {
        lock(&self.shared.store).diagnostics(uri)
    }

    /// Waits up to `timeout` for the first diagnostics published for `uri`
    /// after its latest [`sync_document`](Self::sync_document) (for a
    /// document not opened through Steward: the latest ones, or the first to
    /// come). A publication that names an older version does not count.
    /// `None` when nothing fresh came in time.
    pub async fn wait_for_diagnostics(
        &self,
        uri: &Url,
        timeout: Duration,
    ) -> Option<Vec<lsp_types::Diagnostic>> {
        let deadline = Instant::now() + timeout;
        // Subscribed before the first look, so no publication is missed.
        let mut published = self.shared.published.subscribe();
        loop {
            if let Some(fresh) = lock(&self.shared.store).fresh_diagnostics(uri) {
                return Some(fresh);
            }
            match tokio::time::timeout_at(deadline, published.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return None,
            }
        }
    }

    /// The oldest work-done progress the server has begun and not ended
    /// (`None`: it reports no work in progress, or the connection closed).
    pub fn progress(&self) -> Option<Progress> {
        self.shared.progress.borrow().oldest().cloned()
    }

    /// Waits up to `timeout` until the server has no work-done progress
    /// unfinished (at once when it has none; a closed connection has none).
    /// `Err` with the oldest unfinished one when the time is up: a token
    /// begun and never ended holds a caller only this long.
    pub async fn wait_for_progress_end(&self, timeout: Duration) -> Result<(), Progress> {
        let deadline = Instant::now() + timeout;
        let mut unfinished = self.shared.progress.subscribe();
        loop {
            if unfinished.borrow_and_update().oldest().is_none() {
                return Ok(());
            }
            match tokio::time::timeout_at(deadline, unfinished.changed()).await {
                Ok(Ok(())) => {}
                // The sender lives in `shared`, as long as `self`.
                Ok(Err(_)) => return Ok(()),
                Err(_) => return unfinished.borrow().oldest().cloned().map_or(Ok(()), Err),
            }
        }
    }

    /// Ends the session: `shutdown`, then `exit` (only to a server Steward
    /// started), then the wait for that process to exit, all bounded by
    /// `spec.shutdownTimeout`; then closes the connection; then, for a
    /// server Steward started, SIGTERM → `grace` → SIGKILL of its process
    /// group (reaped). Emits no event. Safe on a connection that already
    /// died.
    ///
    /// Takes `&self`: a connection shared with queries in flight is stopped
    /// all the same (their requests fail), never left running beside its
    /// successor. A second call does nothing.
    pub async fn stop(&self, grace: Duration) {
        {
            let mut life = lock(&self.shared.life);
            if life.stopped {
                return;
            }
            life.stopped = true;
        }
        let process = lock(&self.process).take();
        let started = Instant::now();
        let deadline = started + self.shutdown_timeout;
        let connected = lock(&self.shared.life).closed.is_none()
            && process
                .as_ref()
                .is_none_or(|process| process.try_status().is_none());
        if connected {
            // The timer is dropped as soon as the answer arrives; a late
            // answer is discarded by the main loop.
            let shutdown = raw::request(&self.socket, "shutdown", Value::Null)
                .expect("shutdown is in the request table");
            match tokio::time::timeout_at(deadline, shutdown).await {
                Ok(Ok(_)) => tracing::debug!(server = %self.name, "language server shut down"),
                Ok(Err(error)) => {
                    tracing::debug!(server = %self.name, error = %describe(&error), "shutdown failed")
                }
                Err(_) => tracing::debug!(
                    server = %self.name,
                    timeout = %humantime::format_duration(self.shutdown_timeout),
                    "no answer to shutdown in time"
                ),
            }
            // `exit` ends the server's process: only for one Steward owns.
            if let Some(process) = &process
                && self.socket.notify::<Exit>(()).is_ok()
            {
                let exited = tokio::time::timeout_at(deadline, process.exited()).await;
                tracing::debug!(server = %self.name, exited = exited.is_ok(), "exit sent");
            }
        }
        // Closing: the main loop flushes what is queued and drops the streams.
        let _ = self.socket.emit(Stop);
        let session = {
            let mut tasks = lock(&self.tasks);
            tasks.close.cancel();
            tasks.session.take()
        };
        if let Some(mut session) = session
            && tokio::time::timeout(CLOSE_WAIT, &mut session)
                .await
                .is_err()
        {
            session.abort();
            let _ = session.await;
        }
        lock(&self.tasks).abort();
        // The session task may have been aborted before it saw the end.
        self.shared.end_progress();
        if let Some(mut process) = process {
            let report = process.stop(grace).await;
            tracing::debug!(server = %self.name, outcome = ?report.outcome, clean = report.clean, "language server process stopped");
        }
        tracing::info!(server = %self.name, elapsed_ms = started.elapsed().as_millis() as u64, "language server stopped");
    }
}

impl Drop for LspConnection {
    fn drop(&mut self) {
        // Silence first; then `tasks` aborts the session (closing the
        // connection) and dropping `process` SIGKILLs its group.
        lock(&self.shared.life).stopped = true;
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use steward_schema::formats::LspTransport;

    use super::*;
    use crate::runtime::lsp::testing::*;

    #[test]
    fn connections_and_their_futures_can_move_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        fn assert_send<T: Send>(_: &T) {}
        assert_send_sync::<LspConnection>();
        let spawner = Spawner::new().unwrap();
        let spec = spec(Path::new("/"), LspTransport::Tcp);
        let (on_event, _rx) = events();
        let connect = LspConnection::connect(&spawner, "x", &spec, on_event);
        assert_send(&connect);
        fn uses(connection: LspConnection, uri: Url) {
            assert_send(&connection.sync_document(uri.clone(), "rust", String::new()));
            assert_send(&connection.close_document(&uri));
            assert_send(&connection.request("textDocument/hover", Value::Null, SOON));
            assert_send(&connection.wait_for_diagnostics(&uri, SOON));
            assert_send(&connection.wait_for_progress_end(SOON));
            assert_send(&connection.stop(SOON));
        }
        let _ = uses;
    }
}

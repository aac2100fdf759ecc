//! [`McpConnection`]: one established session with one MCP server (and,
//! for stdio, the process behind it) — its lists (kept up to date by the
//! watcher task), the handle calls are forwarded through, and the orderly
//! stop: the watcher task closes the session first, then the process is
//! stopped.

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use steward_schema::resource::{McpServerSpec, McpTransport};
use tokio::time::Instant;

use super::connect::{Opened, Session, connect_http, connect_stdio};
use super::lists::McpLists;
use super::relay::{Broadcast, McpHandle, Relay};
use super::session::Upstream;
use super::watch::{WatchArgs, Watcher};
use super::{McpEventHandler, McpTimeouts};
use crate::runtime::process::{ManagedProcess, Spawner};
use crate::runtime::start::StartError;
use crate::support::sync::lock;

/// One established MCP session (and, for stdio, the process behind it).
pub struct McpConnection {
    name: String,
    peer: Upstream,
    relay: Arc<Relay>,
    /// Written by the watcher task only, after each re-list.
    lists: Arc<Mutex<Arc<McpLists>>>,
    process: Option<ManagedProcess>,
    watcher: Option<Watcher>,
    /// Set first thing in stop/drop: silences the handler and the watcher.
    stopped: Arc<AtomicBool>,
}

impl fmt::Debug for McpConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpConnection")
            .field("name", &self.name)
            .field("pid", &self.pid())
            .field("lists", &*lock(&self.lists))
            .finish_non_exhaustive()
    }
}

impl McpConnection {
    /// Spawn (stdio) or connect (http), handshake, list tools and prompts,
    /// all within the transport's handshake timeout.
    ///
    /// `on_event` is called from a background task, only for what happens
    /// after the session is established: a list change announced while
    /// connecting is already in the returned lists, and an exit while
    /// connecting is the error. (On a multi-threaded runtime the first call
    /// may race with the caller receiving `Ok`: treat an event as "look at
    /// this server again".)
    pub async fn connect(
        spawner: &Spawner,
        name: &str,
        spec: &McpServerSpec,
        workspace: &Path,
        timeouts: McpTimeouts,
        on_event: McpEventHandler,
    ) -> Result<McpConnection, StartError> {
        let started = Instant::now();
        let relay = Relay::new(workspace);
        let result = match spec.transport {
            McpTransport::Stdio => {
                connect_stdio(spawner, name, spec, workspace, timeouts, relay).await
            }
            McpTransport::Http | McpTransport::Sse => {
                connect_http(name, spec, timeouts, relay).await
            }
        };
        match result {
            Ok(opened) => {
                let connection = McpConnection::assemble(name, opened, timeouts, on_event);
                let lists = lock(&connection.lists).clone();
                tracing::info!(
                    server = %name,
                    pid = connection.pid(),
                    tools = lists.tools.len(),
                    prompts = lists.prompts.len(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "mcp server connected"
                );
                Ok(connection)
            }
            Err(error) => {
                tracing::info!(server = %name, reason = %error.reason, error = %crate::runtime::first_line(&error.message), "mcp server failed to start");
                Err(error)
            }
        }
    }

    fn assemble(
        name: &str,
        opened: Opened,
        timeouts: McpTimeouts,
        on_event: McpEventHandler,
    ) -> McpConnection {
        let Opened {
            session,
            process,
            lost,
            announced,
            stopped,
            relist_timeout,
            dig,
            relay,
        } = opened;
        let Session {
            task,
            cancel,
            peer,
            capabilities,
            lists,
        } = session;
        let lists = Arc::new(Mutex::new(Arc::new(lists)));
        let watcher = Watcher::spawn(WatchArgs {
            name: name.to_owned(),
            task,
            cancel,
            peer: peer.clone(),
            lost,
            announced,
            exit: process.as_ref().map(ManagedProcess::exit_watch),
            on_event,
            stopped: Arc::clone(&stopped),
            timeouts,
            dig,
            relay: relay.clone(),
            capabilities,
            lists: Arc::clone(&lists),
            relist_timeout,
        });
        McpConnection {
            name: name.to_owned(),
            peer,
            relay,
            lists,
            process,
            watcher: Some(watcher),
            stopped,
        }
    }

    /// The stdio server's pid (`None` for a remote server).
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ManagedProcess::pid)
    }

    /// Every tool name, as the server lists them (unfiltered).
    pub fn tools(&self) -> Vec<String> {
        lock(&self.lists)
            .tools
            .iter()
            .map(|t| t.name.to_string())
            .collect()
    }

    /// Every prompt name, as the server lists them.
    pub fn prompts(&self) -> Vec<String> {
        lock(&self.lists)
            .prompts
            .iter()
            .map(|p| p.name.clone())
            .collect()
    }

    /// Everything the server offers, as it describes it (unfiltered), as of
    /// its last listing.
    pub fn lists(&self) -> Arc<McpLists> {
        lock(&self.lists).clone()
    }

    /// A handle to forward requests over this connection.
    pub fn handle(&self) -> McpHandle {
        McpHandle {
            peer: self.peer.clone(),
            relay: self.relay.clone(),
        }
    }

    /// Where notifications that belong to no forwarded request go (set once,
    /// right after connecting).
    pub fn set_broadcast(&self, broadcast: Broadcast) {
        let name: Arc<str> = self.name.as_str().into();
        self.relay
            .set_broadcast(Arc::new(move |notification| broadcast(&name, notification)));
    }

    /// Waits until no forwarded request is in flight, or `deadline`; true
    /// when drained, and then no new request is sent over this connection
    /// (a request that arrives later may go to the next one).
    pub async fn drain(&self, deadline: Instant) -> bool {
        tokio::time::timeout_at(deadline, self.relay.close_when_drained())
            .await
            .is_ok()
    }

    /// Closes the session (bounded by `close_timeout`; for stdio this closes
    /// the server's stdin and waits for it to exit), then stops the process:
    /// SIGTERM → `grace` → SIGKILL, group reaped. Emits no event.
    pub async fn stop(mut self, close_timeout: Duration, grace: Duration) {
        self.stopped.store(true, Ordering::SeqCst);
        // Nothing is sent from now on; what is in flight ends with the
        // session, answered `Closed` (it may have run), never sent again.
        self.relay.close();
        let started = Instant::now();
        let deadline = started + close_timeout;
        if let Some(watcher) = self.watcher.take() {
            watcher.close(deadline).await;
        }
        if let Some(mut process) = self.process.take() {
            let closed = tokio::time::timeout_at(deadline, process.exited())
                .await
                .is_ok();
            let report = process.stop(grace).await;
            tracing::debug!(server = %self.name, exited_on_close = closed, outcome = ?report.outcome, "mcp server process stopped");
        }
        tracing::info!(server = %self.name, elapsed_ms = started.elapsed().as_millis() as u64, "mcp server stopped");
    }

    /// The stdio server's sandbox, as status shows it.
    pub fn sandbox(&self) -> Option<crate::runtime::sandbox::SandboxStatus> {
        self.process
            .as_ref()
            .and_then(|process| process.sandbox().map(|s| s.status()))
    }

    /// The code-running files the stdio server could create (absent when
    /// it started): watched for.
    pub fn unpinned(&self) -> Vec<std::path::PathBuf> {
        self.process
            .as_ref()
            .and_then(|process| process.sandbox().map(|s| s.report.unpinned.clone()))
            .unwrap_or_default()
    }

    /// The stdio server's last `n` stderr lines, oldest first.
    pub fn stderr_tail(&self, n: usize) -> Vec<String> {
        self.process
            .as_ref()
            .map(|process| process.stderr_tail(n))
            .unwrap_or_default()
    }
}

impl Drop for McpConnection {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        // Aborting drops the session (its drop guard cancels rmcp's loop);
        // dropping the process SIGKILLs its group.
        if let Some(watcher) = &self.watcher {
            watcher.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::mcp::testing::*;

    #[test]
    fn connections_and_their_futures_can_move_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        fn assert_send<T: Send>(_: &T) {}
        assert_send_sync::<McpConnection>();
        let spawner = spawner();
        let spec = spec(McpTransport::Sse);
        let (on_event, _rx) = events();
        let connect =
            McpConnection::connect(&spawner, "x", &spec, Path::new("/"), timeouts(), on_event);
        assert_send(&connect);
        fn stop(connection: McpConnection) {
            assert_send(&connection.stop(SOON, SOON));
        }
        let _ = stop;
    }
}

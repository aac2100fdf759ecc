//! [`McpConnection`]: one established session with one MCP server (and,
//! for stdio, the process behind it) — its lists, the handle calls are
//! forwarded through, refresh, and the orderly stop: the watcher task closes
//! the session first, then the process is stopped.

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::{Peer, RoleClient};
use steward_schema::resource::{McpServerSpec, McpTransport};
use tokio::time::Instant;

use super::connect::{Opened, Session, connect_http, connect_stdio};
use super::describe::Dig;
use super::lists::{Capabilities, ListError, McpLists, list_all};
use super::relay::{Broadcast, McpHandle, Relay};
use super::watch::{WatchArgs, Watcher};
use super::{McpEventHandler, McpTimeouts};
use crate::runtime::process::{ManagedProcess, Spawner};
use crate::runtime::start::StartError;
use crate::support::sync::lock;

/// One established MCP session (and, for stdio, the process behind it).
pub struct McpConnection {
    name: String,
    peer: Peer<RoleClient>,
    relay: Arc<Relay>,
    capabilities: Capabilities,
    lists: Mutex<Arc<McpLists>>,
    /// Serializes refreshes so an older listing never overwrites a newer one.
    refresh_lock: tokio::sync::Mutex<()>,
    refresh_timeout: Duration,
    dig: Dig,
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
            notices,
            stopped,
            refresh_timeout,
            dig,
            relay,
        } = opened;
        let Session {
            running,
            cancel,
            peer,
            capabilities,
            lists,
        } = session;
        let watcher = Watcher::spawn(WatchArgs {
            name: name.to_owned(),
            running,
            cancel,
            peer: peer.clone(),
            notices,
            exit: process.as_ref().map(ManagedProcess::exit_watch),
            on_event,
            stopped: Arc::clone(&stopped),
            timeouts,
            dig,
            relay: relay.clone(),
        });
        McpConnection {
            name: name.to_owned(),
            peer,
            relay,
            capabilities,
            lists: Mutex::new(Arc::new(lists)),
            refresh_lock: tokio::sync::Mutex::new(()),
            refresh_timeout,
            dig,
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

    /// Everything the server offers, as it describes it (unfiltered).
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
        self.relay.set_broadcast(broadcast);
    }

    /// Waits until no forwarded request is in flight, or `deadline`; true
    /// when drained.
    pub async fn drain(&self, deadline: Instant) -> bool {
        tokio::time::timeout_at(deadline, self.relay.drained())
            .await
            .is_ok()
    }

    /// Re-lists tools and prompts (after
    /// [`McpEvent::ToolsChanged`](super::McpEvent::ToolsChanged) or
    /// [`McpEvent::PromptsChanged`](super::McpEvent::PromptsChanged)), bounded by the handshake timeout. On an
    /// error the lists are unchanged.
    pub async fn refresh(&self) -> Result<(), String> {
        let _serial = self.refresh_lock.lock().await;
        let listed = tokio::time::timeout(
            self.refresh_timeout,
            list_all(&self.name, &self.peer, self.capabilities, self.dig),
        )
        .await;
        match listed {
            Ok(Ok(lists)) => {
                tracing::debug!(server = %self.name, tools = lists.tools.len(), prompts = lists.prompts.len(), "mcp lists refreshed");
                *lock(&self.lists) = Arc::new(lists);
                Ok(())
            }
            Ok(Err(ListError { phase, message })) => Err(format!("{phase}: {message}")),
            Err(_) => Err(format!(
                "refresh the lists: no answer within {}",
                humantime::format_duration(self.refresh_timeout)
            )),
        }
    }

    /// Closes the session (bounded by `close_timeout`; for stdio this closes
    /// the server's stdin and waits for it to exit), then stops the process:
    /// SIGTERM → `grace` → SIGKILL, group reaped. Emits no event.
    pub async fn stop(mut self, close_timeout: Duration, grace: Duration) {
        self.stopped.store(true, Ordering::SeqCst);
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
    use serde_json::json;

    use super::*;
    use crate::runtime::mcp::testing::*;
    use crate::runtime::test_support::{SOON, alive, eventually};

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
        fn refresh_and_stop(connection: McpConnection) {
            assert_send(&connection.refresh());
            assert_send(&connection.stop(SOON, SOON));
        }
        let _ = refresh_and_stop;
    }

    #[tokio::test]
    async fn dropping_a_connection_kills_its_server() {
        let dir = tempfile::tempdir().unwrap();
        let (result, mut rx) = connect(&fake(json!({})), dir.path(), timeouts()).await;
        let connection = result.unwrap();
        let pid = connection.pid().unwrap();
        drop(connection);
        eventually("the server is gone", || !alive(pid)).await;
        no_more_events(&mut rx);
    }

    #[tokio::test]
    async fn stop_kills_a_server_that_ignores_stdin_close_and_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("record.jsonl");
        let mut spec = fake(json!({ "ignoreSigterm": true, "record": rec }));
        // The fake exits when its stdin closes; the shell then becomes a
        // `sleep` that inherited an ignored SIGTERM.
        spec.command = Some("sh".to_owned());
        spec.args = Some(vec![
            "-c".to_owned(),
            r#"trap '' TERM; "$0"; exec sleep 1000"#.to_owned(),
            fake_server().display().to_string(),
        ]);
        let (result, mut rx) = connect(&spec, dir.path(), timeouts()).await;
        let connection = result.unwrap();
        let pid = connection.pid().unwrap();
        let (close, grace) = (Duration::from_millis(300), Duration::from_millis(300));
        let started = Instant::now();
        connection.stop(close, grace).await;
        let elapsed = started.elapsed();
        assert!(!alive(pid), "the server survived stop");
        assert!(elapsed >= close + grace, "{elapsed:?}");
        assert!(
            elapsed < close + grace + Duration::from_secs(3),
            "{elapsed:?}"
        );
        no_more_events(&mut rx);
    }

    /// Numbers, not a pass/fail test:
    /// `cargo test -p steward --lib mcp::connection::tests::measure -- --ignored --nocapture`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "measurement"]
    async fn measure_connect_latency_and_memory() {
        fn rss_kib() -> u64 {
            std::fs::read_to_string("/proc/self/status")
                .unwrap()
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|value| value.trim().trim_end_matches(" kB").trim().parse().ok())
                .unwrap()
        }
        let dir = tempfile::tempdir().unwrap();
        let spawner = spawner();
        let spec = fake(json!({ "tools": ["a", "b", "c"], "prompts": ["p"] }));
        let mut latencies = Vec::new();
        for _ in 0..30 {
            let (on_event, _rx) = events();
            let started = Instant::now();
            let connection =
                McpConnection::connect(&spawner, "m", &spec, dir.path(), timeouts(), on_event)
                    .await
                    .unwrap();
            latencies.push(started.elapsed());
            connection.stop(SOON, SOON).await;
        }
        latencies.sort();
        let n = 50;
        let before = rss_kib();
        let mut connections = Vec::new();
        for i in 0..n {
            let (on_event, _rx) = events();
            connections.push(
                McpConnection::connect(
                    &spawner,
                    &format!("m{i}"),
                    &spec,
                    dir.path(),
                    timeouts(),
                    on_event,
                )
                .await
                .unwrap(),
            );
        }
        let after = rss_kib();
        let stop_started = Instant::now();
        futures::future::join_all(connections.into_iter().map(|c| c.stop(SOON, SOON))).await;
        let stop_all = stop_started.elapsed();

        let (mut server, url) = http_fake(dir.path(), json!({ "tools": ["a", "b", "c"] })).await;
        let mut http = Vec::new();
        for _ in 0..30 {
            let (on_event, _rx) = events();
            let started = Instant::now();
            let connection = McpConnection::connect(
                &spawner,
                "h",
                &http_spec(&url),
                dir.path(),
                timeouts(),
                on_event,
            )
            .await
            .unwrap();
            http.push(started.elapsed());
            connection.stop(SOON, SOON).await;
        }
        http.sort();
        server.stop(SOON).await;
        println!(
            "http connect p50 {:?} p95 {:?}",
            http[http.len() / 2],
            http[http.len() * 95 / 100]
        );
        println!(
            "connect p50 {:?} p95 {:?} max {:?}; rss +{} KiB for {n} connections ({} KiB each); stop all {n}: {:?}",
            latencies[latencies.len() / 2],
            latencies[latencies.len() * 95 / 100],
            latencies[latencies.len() - 1],
            after.saturating_sub(before),
            after.saturating_sub(before) / n,
            stop_all,
        );
    }
}

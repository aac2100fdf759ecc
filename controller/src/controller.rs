//! `steward run`: wiring of the whole loop for one workspace.
//!
//! One event loop owns every mutation of the desired state; it reacts to
//! settled file changes (watch), runtime events (a server exited, its tool
//! list changed), control requests (reload, stop, start), the periodic
//! resync and shutdown. Each of these only decides *which keys to look at*
//! and enqueues them; workers reconcile keys concurrently (bounded), never
//! two at once for one key.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use steward_schema::desired::CliOptions;
use steward_schema::load::ParsedSource;
use steward_schema::resource::{
    ConditionStatus, Phase, ReloadSummary, ResourceKind, Skipped, SourceState,
};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::control::{self, Incoming, Request, Response};
use crate::lock::{ControllerLock, LockError};
use crate::lsp_service::LspService;
use crate::paths::{Paths, PathsError, PrivateDirError, create_private_dir, process_env};
use crate::queue::{WorkQueue, run_workers};
use crate::reconcile::{Outcome, ReconcileConfig, Reconciler, RuntimeEvent};
use crate::runtime::process::Spawner;
use crate::runtime::reaper;
use crate::snapshot::{Applied, DesiredStore, Key};
use crate::status::{ControllerFacts, StatusStore, now_rfc3339, rfc3339};
use crate::watch::{FileChange, Judge, Verdict, WatchConfig, Watcher};

/// Options of `steward run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub workspace: PathBuf,
    pub mcp_config: Vec<String>,
    pub allowed_mcp: Option<Vec<String>>,
    pub allowed_lsp: Option<Vec<String>>,
    pub no_lsp: bool,
    /// Coalescing window of file events (default 300 ms).
    pub debounce: Duration,
    /// Concurrent reconciles (default 4).
    pub workers: usize,
    /// Period of the full resync (every key enqueued).
    pub resync: Duration,
    pub reconcile: ReconcileConfig,
    /// Test hook: after the sources were first read, create this file and
    /// wait until it is removed (a test edits a source meanwhile).
    pub hold_after_read: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Paths(#[from] PathsError),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(transparent)]
    PrivateDir(#[from] PrivateDirError),
    #[error("start the process spawner: {0}")]
    Spawner(std::io::Error),
    #[error("listen on the control socket {path}: {source}")]
    Socket {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("watch the sources: {0}")]
    Watch(String),
}

/// Servers the user stopped, persisted under HOME_DIR.
#[derive(Debug, Default, Serialize, Deserialize)]
struct StoppedFile {
    #[serde(default)]
    servers: Vec<StoppedEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct StoppedEntry {
    kind: ResourceKind,
    name: String,
}

fn read_stopped(path: &Path) -> BTreeSet<Key> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return BTreeSet::new();
    };
    serde_json::from_str::<StoppedFile>(&text)
        .map(|f| {
            f.servers
                .into_iter()
                .map(|e| Key {
                    kind: e.kind,
                    name: e.name,
                })
                .collect()
        })
        .unwrap_or_default()
}

fn write_stopped(path: &Path, keys: &BTreeSet<Key>) -> std::io::Result<()> {
    let file = StoppedFile {
        servers: keys
            .iter()
            .map(|k| StoppedEntry {
                kind: k.kind,
                name: k.name.clone(),
            })
            .collect(),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(&tmp, path)
}

/// Tracks what the current reload did, key by key, until all its keys were
/// reconciled; then it becomes `status.controller.lastReload`.
#[derive(Debug, Default)]
struct ReloadTracker {
    current: Option<(ReloadSummary, BTreeSet<Key>)>,
    waiters: Vec<oneshot::Sender<ReloadSummary>>,
}

impl ReloadTracker {
    fn begin<'k>(&mut self, trigger: &str, changed: &[Key], all: impl Iterator<Item = &'k Key>) {
        let (summary, pending) = self.current.get_or_insert_with(|| {
            (
                ReloadSummary {
                    at: now_rfc3339(),
                    trigger: String::new(),
                    ..ReloadSummary::default()
                },
                BTreeSet::new(),
            )
        });
        if !summary.trigger.is_empty() && !summary.trigger.contains(trigger) {
            summary.trigger.push_str(", ");
        }
        if !summary.trigger.contains(trigger) {
            summary.trigger.push_str(trigger);
        }
        pending.extend(changed.iter().cloned());
        summary.unchanged = all
            .filter(|k| !pending.contains(*k))
            .map(|k| k.name.clone())
            .collect();
    }

    /// Record an outcome; returns the summary when the reload is complete.
    fn outcome(&mut self, key: &Key, outcome: &Outcome) -> Option<ReloadSummary> {
        let (summary, pending) = self.current.as_mut()?;
        if !pending.remove(key) {
            return None;
        }
        let name = key.name.clone();
        match outcome {
            Outcome::Added => summary.added.push(name),
            Outcome::Restarted => summary.restarted.push(name),
            Outcome::Removed => summary.removed.push(name),
            Outcome::Failed => summary.failed.push(name),
            Outcome::Unchanged => summary.unchanged.push(name),
            Outcome::Skipped(reason) => summary.skipped.push(Skipped {
                kind: key.kind,
                name,
                reason: *reason,
            }),
        }
        self.finish_if_done()
    }

    fn finish_if_done(&mut self) -> Option<ReloadSummary> {
        if self.current.as_ref().is_some_and(|(_, p)| p.is_empty()) {
            let (mut summary, _) = self.current.take()?;
            summary.unchanged.sort();
            summary.unchanged.dedup();
            for w in self.waiters.drain(..) {
                let _ = w.send(summary.clone());
            }
            return Some(summary);
        }
        None
    }
}

/// Everything the event loop shares with workers and socket handlers.
struct Shared {
    store: Arc<DesiredStore>,
    status: Arc<StatusStore>,
    reconciler: Arc<Reconciler>,
    queue: Arc<WorkQueue<Key>>,
    lsp: Arc<LspService>,
}

impl Shared {
    fn enqueue_all(&self) {
        for key in self.store.snapshot().keys() {
            self.queue.add(key);
        }
    }

    /// Enqueue what `applied` changed, and retry failed servers of the
    /// sources that were saved (a save retries a `Failed` server at once).
    fn apply(&self, applied: &Applied, tracker: &mut ReloadTracker, trigger: &str) {
        let snap = self.store.snapshot();
        let mut keys: BTreeSet<Key> = applied.changed.iter().cloned().collect();
        for key in self.status.keys_in_phase(Phase::Failed) {
            if snap
                .get(&key)
                .is_some_and(|d| applied.touched.contains(&d.source()))
            {
                keys.insert(key);
            }
        }
        for status in &applied.rejected {
            tracing::warn!(source = %status.path, error = status.error.as_deref().unwrap_or(""), "invalid source ignored; the previous content stays in force");
        }
        if applied.server_command_changed {
            self.status.set_controller_condition(
                "RestartRequired",
                ConditionStatus::True,
                Some("ServerCommandChanged"),
                Some("mcp.serverCommand changed; restart `steward run` to apply it"),
            );
        }
        self.status.touch();
        if keys.is_empty() && applied.rejected.is_empty() {
            return;
        }
        let keys: Vec<Key> = keys.into_iter().collect();
        tracker.begin(trigger, &keys, snap.key_iter());
        for key in &keys {
            self.reconciler.retry_now(key);
            self.queue.add(key.clone());
        }
        if keys.is_empty()
            && let Some(summary) = tracker.finish_if_done()
        {
            self.status.set_last_reload(summary);
        }
    }
}

/// Run the controller until `shutdown` is cancelled.
pub async fn run(opts: RunOptions, shutdown: CancellationToken) -> Result<(), RunError> {
    let env = process_env();
    let paths = Paths::resolve(&opts.workspace, &env)?;
    match crate::runtime::process::raise_fd_limit() {
        Ok((before, after)) if before != after => {
            tracing::info!(before, after, "raised the open-file limit");
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "could not raise the open-file limit"),
    }
    // Private (0700) whatever the umask: the lock, the control socket and
    // the stopped-servers list live there.
    create_private_dir(&paths.state_dir())?;
    create_private_dir(&paths.runtime_dir)?;
    // One controller per canonical workspace, whatever its HOME_DIR; the
    // HOME_DIR lock guards the state directory the socket lives in.
    let _workspace_lock = ControllerLock::acquire(&paths.workspace_lock_file(), &paths.workspace)?;
    let lock = ControllerLock::acquire(&paths.lock_file(), &paths.workspace)?;
    // Orphaned descendants of servers come to us, not init (see
    // runtime::reaper); and a killed predecessor's leftovers go first.
    if let Err(error) = reaper::become_subreaper() {
        tracing::warn!(%error, "could not become a child subreaper; escaped descendants of servers go to init");
    }
    let instance_file = paths.workspace_instance_file();
    match reaper::clean_up_predecessor(&instance_file) {
        Ok(killed) if !killed.is_empty() => {
            tracing::warn!(
                ?killed,
                "killed what a previous controller of this workspace left running"
            );
        }
        Ok(_) => {}
        Err(error) => {
            tracing::warn!(%error, file = %instance_file.display(), "could not record this controller's instance");
        }
    }
    tracing::info!(workspace = %paths.workspace.display(), lock = %lock.path().display(), "controller starting");

    // Watch first, then read: a write after the watches are in place is
    // either seen by the cold start's read or reported afterwards (both,
    // at worst, and the second apply changes nothing). Until the store
    // exists the judge says "look again once quiet", and nothing is
    // applied before the event loop runs anyway.
    let judged_store: Arc<OnceLock<Arc<DesiredStore>>> = Arc::default();
    let judge: Judge = {
        let store = judged_store.clone();
        Arc::new(move |path: &Path| {
            let Some(store) = store.get() else {
                return Verdict::Invalid;
            };
            match store.source_of(path) {
                None => Verdict::Invalid,
                Some(which) => {
                    let loaded: ParsedSource = store.load_strict(&which);
                    match loaded.state {
                        SourceState::Absent => Verdict::Absent,
                        SourceState::Valid => Verdict::Valid,
                        SourceState::Invalid => Verdict::Invalid,
                    }
                }
            }
        })
    };
    let (_watcher, mut changes) = Watcher::start(
        paths.watched_files(),
        WatchConfig {
            window: opts.debounce,
        },
        judge,
    )
    .map_err(|e| RunError::Watch(e.to_string()))?;

    let cli = CliOptions {
        allowed_mcp: opts.allowed_mcp.clone(),
        allowed_lsp: opts.allowed_lsp.clone(),
        lsp_enabled: !opts.no_lsp,
    };
    let store = Arc::new(DesiredStore::cold_start(
        paths.clone(),
        env,
        cli,
        opts.mcp_config.clone(),
    ));
    let _ = judged_store.set(store.clone());
    if let Some(hold) = &opts.hold_after_read {
        hold_until_removed(hold).await;
    }
    let status = Arc::new(StatusStore::new(ControllerFacts {
        pid: Some(std::process::id()),
        started_at: Some(rfc3339(SystemTime::now())),
    }));
    let (event_tx, mut event_rx) = mpsc::unbounded_channel::<RuntimeEvent>();
    let (outcome_tx, mut outcome_rx) = mpsc::unbounded_channel::<(Key, Outcome)>();
    let cancel = CancellationToken::new();
    let spawner = Spawner::new().map_err(RunError::Spawner)?;
    let reaping = tokio::spawn(reap_orphans(spawner.clone()));
    let lsp = Arc::new(LspService::default());
    let reconciler = Arc::new(Reconciler::new(
        store.clone(),
        status.clone(),
        spawner.clone(),
        opts.reconcile.clone(),
        read_stopped(&paths.stopped_file()),
        lsp.clone(),
        event_tx,
        outcome_tx,
        cancel.clone(),
    ));
    let queue = Arc::new(WorkQueue::<Key>::new());
    let shared = Shared {
        store: store.clone(),
        status: status.clone(),
        reconciler: reconciler.clone(),
        queue: queue.clone(),
        lsp,
    };

    // Workers.
    let workers = {
        let reconciler = reconciler.clone();
        tokio::spawn(run_workers(queue.clone(), opts.workers, move |key| {
            reconciler.clone().reconcile(key)
        }))
    };

    // Control socket.
    let socket_path = paths.socket_path();
    let listener = control::bind(&socket_path).map_err(|source| RunError::Socket {
        path: socket_path.clone(),
        source,
    })?;
    let (control_tx, mut control_rx) = mpsc::channel::<Incoming>(16);
    let server = {
        let store = store.clone();
        let status = status.clone();
        tokio::spawn(control::serve(listener, control_tx, move |stream| {
            watch_stream(stream, store.clone(), status.clone())
        }))
    };

    // Cold start: everything is one reload.
    let mut tracker = ReloadTracker::default();
    let all = shared.store.snapshot().keys();
    tracker.begin(
        "start",
        &all.iter().cloned().collect::<Vec<_>>(),
        all.iter(),
    );
    if let Some(summary) = tracker.finish_if_done() {
        status.set_last_reload(summary);
    }
    shared.enqueue_all();
    tracing::info!(servers = all.len(), socket = %socket_path.display(), "controller running");

    let mut resync = tokio::time::interval(opts.resync);
    resync.tick().await;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            Some(FileChange { path, .. }) = changes.recv() => {
                let applied = store.apply_judged(&path);
                tracing::info!(source = %path.display(), changed = applied.changed.len(), "source changed");
                shared.apply(&applied, &mut tracker, &path.to_string_lossy());
            }
            Some(event) = event_rx.recv() => {
                reconciler.note_event(&event);
                queue.add(event.key.clone());
            }
            Some((key, outcome)) = outcome_rx.recv() => {
                if let Some(summary) = tracker.outcome(&key, &outcome) {
                    log_reload(&summary);
                    let failed = !summary.failed.is_empty();
                    status.set_controller_condition(
                        "ReloadFailed",
                        if failed { ConditionStatus::True } else { ConditionStatus::False },
                        Some(if failed { "ServersFailed" } else { "ReloadSucceeded" }),
                        failed.then(|| format!("failed: {}", summary.failed.join(", "))).as_deref(),
                    );
                    status.set_last_reload(summary);
                }
            }
            Some(incoming) = control_rx.recv() => {
                handle_request(incoming, &shared, &mut tracker, &paths);
            }
            _ = resync.tick() => {
                // Level-triggered: compare the files with the snapshot too,
                // in case the watcher missed a change.
                for path in store.watched_files() {
                    if let Some(applied) = store.resync_file(&path) {
                        tracing::info!(source = %path.display(), changed = applied.changed.len(), "source changed unseen; applied by the resync");
                        shared.apply(&applied, &mut tracker, "resync");
                    }
                }
                shared.enqueue_all();
            }
        }
    }

    // Shutdown: cancel queued and in-flight work, then stop every server.
    tracing::info!("controller stopping");
    cancel.cancel();
    queue.shutdown();
    let _ = workers.await;
    reconciler.stop_all().await;
    let orphans = spawner.kill_orphans().await;
    if !orphans.is_empty() {
        tracing::warn!(?orphans, "killed descendants of servers that outlived them");
    }
    reaping.abort();
    reaper::forget_instance(&instance_file);
    server.abort();
    let _ = std::fs::remove_file(&socket_path);
    drop(lock);
    tracing::info!("controller stopped");
    Ok(())
}

/// Reaps the orphans handed to this subreaper, on every SIGCHLD.
async fn reap_orphans(spawner: Spawner) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut children) = signal(SignalKind::child()) else {
        tracing::warn!("cannot listen for SIGCHLD; orphans are reaped only when a server stops");
        return;
    };
    while children.recv().await.is_some() {
        let reaped = spawner.reap_orphans();
        if !reaped.is_empty() {
            tracing::debug!(?reaped, "reaped orphaned descendants of servers");
        }
    }
}

/// Creates `marker` and waits until somebody removes it (see
/// [`RunOptions::hold_after_read`]).
async fn hold_until_removed(marker: &Path) {
    if let Err(error) = std::fs::write(marker, std::process::id().to_string()) {
        tracing::warn!(marker = %marker.display(), %error, "could not create the hold marker; not holding");
        return;
    }
    tracing::info!(marker = %marker.display(), "holding until the marker is removed");
    while marker.exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn log_reload(s: &ReloadSummary) {
    tracing::info!(
        trigger = %s.trigger,
        added = ?s.added,
        removed = ?s.removed,
        restarted = ?s.restarted,
        failed = ?s.failed,
        skipped = s.skipped.len(),
        unchanged = s.unchanged.len(),
        "reload finished"
    );
}

fn handle_request(incoming: Incoming, shared: &Shared, tracker: &mut ReloadTracker, paths: &Paths) {
    let Incoming { request, reply } = incoming;
    match request {
        Request::Status => {
            let snap = shared.store.snapshot();
            let mut r = Response::ok();
            r.status = Some(Box::new(shared.status.workspace_status(&snap)));
            let _ = reply.send(r);
        }
        Request::Watch => {
            let _ = reply.send(Response::error("watch is served on its own connection"));
        }
        Request::Reload => {
            let applied = shared.store.reload_all();
            let (tx, rx) = oneshot::channel();
            tracker.waiters.push(tx);
            shared.apply(&applied, tracker, "steward reload");
            if let Some(summary) = tracker.finish_if_done() {
                shared.status.set_last_reload(summary);
            } else if tracker.current.is_none() {
                // Nothing to reconcile: no outcome will ever come to answer
                // the waiters, so drop them (they answer "nothing to
                // reconcile") instead of leaving `steward reload` hanging.
                tracker.waiters.clear();
            }
            tokio::spawn(async move {
                let response = match rx.await {
                    Ok(summary) => Response {
                        reload: Some(summary),
                        ..Response::ok()
                    },
                    Err(_) => {
                        let mut r = Response::ok();
                        r.message = Some("reload applied; nothing to reconcile".to_owned());
                        r
                    }
                };
                let _ = reply.send(response);
            });
        }
        Request::Lsp(query) => {
            let snap = shared.store.snapshot();
            let status = shared.status.clone();
            let lsp = shared.lsp.clone();
            tokio::spawn(async move {
                let response = match lsp.query(&snap, &status, query).await {
                    Ok((server, result)) => Response {
                        server: Some(server),
                        result: Some(result),
                        ..Response::ok()
                    },
                    Err(e) => Response::error(e),
                };
                let _ = reply.send(response);
            });
        }
        Request::Stop { names } | Request::Start { names } if names.is_empty() => {
            let _ = reply.send(Response::error("change a server: name at least one"));
        }
        Request::Stop { names } => {
            let _ = reply.send(set_stopped(shared, paths, &names, true));
        }
        Request::Start { names } => {
            let _ = reply.send(set_stopped(shared, paths, &names, false));
        }
    }
}

fn set_stopped(shared: &Shared, paths: &Paths, names: &[String], stop: bool) -> Response {
    let snap = shared.store.snapshot();
    let mut keys = Vec::new();
    for name in names {
        let found: Vec<Key> = [Key::mcp(name), Key::lsp(name)]
            .into_iter()
            .filter(|k| snap.get(k).is_some())
            .collect();
        if found.is_empty() {
            let known: Vec<String> = snap.keys().into_iter().map(|k| k.name).collect();
            // Read after "failed to".
            return Response::error(format!(
                "{} {name}: no server of that name is configured for {} (known: {})",
                if stop { "stop" } else { "start" },
                shared.store.paths().workspace.display(),
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        }
        keys.extend(found);
    }
    for key in &keys {
        shared.reconciler.set_stopped(key, stop);
        shared.reconciler.retry_now(key);
        shared.queue.add(key.clone());
    }
    if let Err(e) = write_stopped(&paths.stopped_file(), &shared.reconciler.stopped()) {
        return Response::error(format!("persist the stopped servers: {e}"));
    }
    let mut r = Response::ok();
    r.message = Some(format!(
        "{} {}",
        if stop { "stopped" } else { "started" },
        keys.iter()
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    r
}

/// Stream the status document on every change until the client hangs up.
async fn watch_stream(mut stream: UnixStream, store: Arc<DesiredStore>, status: Arc<StatusStore>) {
    let mut changes = status.subscribe();
    let mut last: Option<Vec<u8>> = None;
    loop {
        let mut r = Response::ok();
        r.status = Some(Box::new(status.workspace_status(&store.snapshot())));
        // Serialized once: compared with the last document sent, and sent
        // only when it differs.
        let Ok(mut line) = serde_json::to_vec(&r) else {
            return;
        };
        line.push(b'\n');
        if last.as_deref() != Some(&line[..]) {
            if stream.write_all(&line).await.is_err() {
                return;
            }
            last = Some(line);
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            // A hung-up client is noticed on the next write; also poll for EOF.
            _ = stream.readable() => {
                let mut buf = [0u8; 1];
                if let Ok(0) = stream.try_read(&mut buf) {
                    return;
                }
            }
        }
        let _ = stream.flush().await;
    }
}

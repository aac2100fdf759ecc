//! `steward run`: wiring of the whole loop for one workspace.
//!
//! One event loop owns every mutation of the desired state; it reacts to
//! settled file changes (watch), runtime events (a server exited, its tool
//! list changed), control requests (reload, stop, start), the periodic
//! resync and shutdown. Each of these only decides *which keys to look at*
//! and enqueues them; workers reconcile keys concurrently (bounded), never
//! two at once for one key.

pub mod backoff;
pub mod instance;
pub mod publish;
pub mod queue;
pub mod reconcile;
mod sandboxed;
pub mod watch;

mod auth;
mod reload;
mod requests;
pub(crate) mod secrets;
mod stopped;

use reload::{ReloadTracker, log_reload, user_actions};
use requests::handle_request;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use steward_schema::desired::CliOptions;
use steward_schema::load::ParsedSource;
use steward_schema::resource::{ConditionStatus, Phase, SourceKind, SourceState};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::control::streams;
use crate::control::{self, Answer, Incoming, RawJson, Reply, Request};
use crate::desired::snapshot::{Applied, Desired, DesiredStore, Key, Snapshot};
use crate::engine::instance::RuntimeEvent;
use crate::engine::queue::{WorkQueue, run_workers};
use crate::engine::reconcile::{ReconcileConfig, Reconciler, Restart, Settled};
use crate::engine::watch::dev::{DevTarget, DevWatcher};
use crate::engine::watch::{FileChange, Judge, Verdict, WatchConfig, WatchError, Watcher};
use crate::gateway::lsp::LspService;
use crate::gateway::pins::Pins;
use crate::gateway::profile::Profile;
use crate::gateway::registry::Registry;
use crate::gateway::serve::{HttpEndpoint, ListenError};
use crate::gateway::{Gateway, GatewayConfig, serve};
use crate::observe::clock::{now_rfc3339, rfc3339};
use crate::observe::events::{EventType, NewEvent, ObjectRef};
use crate::observe::metrics::http::MetricsEndpoint;
use crate::observe::metrics::{Observed, metrics};
use crate::observe::status::{ControllerFacts, StatusStore};
use crate::observe::view::StatusView;
use crate::runtime::process::Spawner;
use crate::runtime::reaper;
use crate::runtime::secrets::book::SecretBook;
use crate::support::lock::{ControllerLock, LockError};
use crate::support::paths::{Paths, PathsError, PrivateDirError, create_private_dir, process_env};
use crate::support::socket;

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
    /// The agent endpoint.
    pub gateway: GatewayOptions,
    /// The Prometheus endpoint.
    pub metrics: MetricsOptions,
}

/// Options of the Prometheus endpoint (`--metrics-listen`).
#[derive(Debug, Clone, Default)]
pub struct MetricsOptions {
    /// Serve `GET /metrics` at this address.
    pub listen: Option<String>,
    /// Bearer token scrapers must send (`--metrics-token-file`).
    pub token_file: Option<PathBuf>,
    /// Label tool calls with their tool too (`--metrics-tool-labels`).
    pub tool_labels: bool,
}

/// Options of the agent endpoint (`steward mcp`, `run --mcp-listen`).
#[derive(Debug, Clone, Default)]
pub struct GatewayOptions {
    /// Streamable HTTP at this address (`--mcp-listen`).
    pub listen: Option<String>,
    /// Bearer token for HTTP clients (`--mcp-token-file`).
    pub token_file: Option<PathBuf>,
    /// Serve one client, seeing the workspace through this profile, on this
    /// process's stdin/stdout, and shut down once no client is attached any
    /// more (`steward mcp` as the controller).
    pub stdio: Option<Profile>,
    /// The stdio session goes on where another controller left it
    /// (`steward mcp` becoming the controller after the last one stopped).
    pub stdio_resume: Option<crate::gateway::resume::Resume>,
    pub config: GatewayConfig,
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
    Watch(#[source] WatchError),
    #[error(transparent)]
    Listen(#[from] ListenError),
}

/// Everything the event loop shares with workers and socket handlers.
struct Shared {
    store: Arc<DesiredStore>,
    status: Arc<StatusStore>,
    reconciler: Arc<Reconciler>,
    queue: Arc<WorkQueue<Key>>,
    lsp: Arc<LspService>,
    view: Arc<StatusView>,
    pins: Arc<Pins>,
    /// The agent endpoint, for what only it knows (`steward tools`).
    gateway: Arc<Gateway>,
    /// The values of `${secret:NAME}` references (see [`secrets`]).
    secrets: Arc<SecretBook>,
    /// Where a finished refresh of the book is reported.
    refreshed: mpsc::UnboundedSender<secrets::Refreshed>,
}

impl Shared {
    fn enqueue_all(&self) {
        for key in self.store.snapshot().keys() {
            self.queue.add(key);
        }
    }

    /// Enqueue what `applied` changed — gates that closed ahead of
    /// everything else — and retry failed servers of the sources that were
    /// saved validly (a save retries a `Failed` server at once; a rejected
    /// save or another file's save does not reset its backoff).
    fn apply(
        &self,
        before: &Snapshot,
        applied: &Applied,
        tracker: &mut ReloadTracker,
        trigger: &str,
    ) {
        self.apply_with(before, applied, tracker, trigger, &BTreeSet::new());
    }

    /// [`Self::apply`], plus `rotated`: keys whose secrets changed (they
    /// are reconciled as part of the same reload, their backoff forgotten).
    fn apply_with(
        &self,
        before: &Snapshot,
        applied: &Applied,
        tracker: &mut ReloadTracker,
        trigger: &str,
        rotated: &BTreeSet<Key>,
    ) {
        let snap = self.store.snapshot();
        self.look_up_new_secrets(&snap);
        let rejected: BTreeSet<SourceKind> = applied.rejected.iter().map(|s| s.kind).collect();
        let saved: Vec<SourceKind> = applied
            .touched
            .iter()
            .copied()
            .filter(|kind| !rejected.contains(kind))
            .collect();
        let mut keys: BTreeSet<Key> = applied.changed.iter().cloned().collect();
        let mut retry: BTreeSet<Key> = rotated.clone();
        keys.extend(rotated.iter().filter(|k| snap.contains(k)).cloned());
        for key in self.status.keys_in_phase(Phase::Failed) {
            if snap.get(&key).is_some_and(|d| saved.contains(&d.source())) {
                keys.insert(key.clone());
                retry.insert(key);
            }
        }
        // A new spec starts from a clean backoff.
        for key in &applied.changed {
            let old = before.get(key).map(|d| d.config_hash().to_owned());
            let new = snap.get(key).map(|d| d.config_hash().to_owned());
            if old != new {
                retry.insert(key.clone());
            }
        }
        if !applied.rejected.is_empty() {
            reload::rejected(trigger);
        }
        for status in &applied.rejected {
            tracing::warn!(source = %status.path, error = status.error.as_deref().unwrap_or(""), "invalid source ignored; the previous content stays in force");
            let error = status.error.as_deref().and_then(|e| e.lines().next());
            self.status.workspace_event(NewEvent::new(
                EventType::Warning,
                "InvalidSource",
                format!(
                    "{}; the previous content stays in force",
                    error.unwrap_or(&status.path)
                ),
            ));
        }
        self.conditions(&snap, applied);
        self.status.touch();
        if keys.is_empty() && applied.rejected.is_empty() {
            return;
        }
        let keys: Vec<Key> = keys.into_iter().collect();
        tracker.begin(trigger, &keys, applied.epoch, snap.key_iter());
        for key in &retry {
            self.reconciler.retry_now(key);
        }
        for key in &keys {
            // A gate closing (or a removal) goes ahead of every start.
            if snap.blocked(key).is_some() || !snap.contains(key) {
                self.queue.add_front(key.clone());
            } else {
                self.queue.add(key.clone());
            }
        }
        if keys.is_empty()
            && let Some(summary) = tracker.finish_if_done()
        {
            self.status.set_last_reload(summary);
        }
    }

    /// Names the desired state references that the book has not looked
    /// up yet (a config edit added them): looked up now, in a task.
    fn look_up_new_secrets(&self, snap: &Snapshot) {
        let referenced: BTreeSet<String> = secrets::users(snap).into_keys().collect();
        let known = self.secrets.known();
        let new: BTreeSet<String> = referenced.difference(&known).cloned().collect();
        if !new.is_empty() {
            secrets::refresh(
                &self.secrets,
                new,
                referenced,
                secrets::Then::Nothing,
                &self.refreshed,
            );
        }
    }

    /// Look every referenced name up again, then go on with `then`.
    fn refresh_secrets(&self, extra: &[String], then: secrets::Then) {
        let mut referenced: BTreeSet<String> =
            secrets::users(&self.store.snapshot()).into_keys().collect();
        referenced.extend(extra.iter().cloned());
        secrets::refresh(
            &self.secrets,
            referenced.clone(),
            referenced,
            then,
            &self.refreshed,
        );
    }

    /// Controller conditions that follow the sources: `SourcesValid` (the
    /// last edit of a file was rejected), `RestartRequired` (an edit of
    /// `mcp.serverCommand`, cleared when reverted).
    fn conditions(&self, snap: &Snapshot, applied: &Applied) {
        let invalid: Vec<String> = snap
            .invalid
            .keys()
            .map(|p| p.display().to_string())
            .collect();
        if invalid.is_empty() {
            if self.status.controller_condition("SourcesValid").is_some() {
                self.status.set_controller_condition(
                    "SourcesValid",
                    ConditionStatus::True,
                    Some("AllSourcesValid"),
                    None,
                );
            }
        } else {
            self.status.set_controller_condition(
                "SourcesValid",
                ConditionStatus::False,
                Some("SourceRejected"),
                Some(&format!(
                    "the last edit of {} was rejected; the previous content stays in force (see sources[].error)",
                    invalid.join(", ")
                )),
            );
        }
        if applied.server_command_changed {
            self.status.workspace_event(NewEvent::new(
                EventType::Warning,
                "RestartRequired",
                "mcp.serverCommand changed; restart `steward run` to apply it",
            ));
            self.status.set_controller_condition(
                "RestartRequired",
                ConditionStatus::True,
                Some("ServerCommandChanged"),
                Some("mcp.serverCommand changed; restart `steward run` to apply it"),
            );
        } else if self.status.controller_condition("RestartRequired") == Some(ConditionStatus::True)
        {
            self.status.set_controller_condition(
                "RestartRequired",
                ConditionStatus::False,
                Some("ServerCommandUnchanged"),
                Some("mcp.serverCommand is as at start"),
            );
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
    let workspace_lock = ControllerLock::acquire(&paths.workspace_lock_file(), &paths.workspace)?;
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
    // Bound before anything starts, so a bad address fails the start.
    let http = match &opts.gateway.listen {
        Some(address) => {
            Some(HttpEndpoint::bind(address, opts.gateway.token_file.as_deref()).await?)
        }
        None => None,
    };
    let scrapes = match &opts.metrics.listen {
        Some(address) => {
            Some(MetricsEndpoint::bind(address, opts.metrics.token_file.as_deref()).await?)
        }
        None => None,
    };
    metrics().set_tool_labels(opts.metrics.tool_labels);

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
    .map_err(RunError::Watch)?;
    // The source of servers under development (`dev.watch`): its targets
    // follow each snapshot (see the main loop).
    let (dev_watcher, mut code_changes) =
        DevWatcher::start(opts.debounce).map_err(RunError::Watch)?;
    // Code-running files a sandboxed server could create at the root.
    let (_pinned_watcher, mut protected_created) =
        crate::engine::watch::pinned::start(&paths.workspace).map_err(RunError::Watch)?;

    let cli = CliOptions {
        home: None,
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
        workspace_name: paths
            .workspace
            .file_name()
            .map_or_else(|| "/".to_owned(), |n| n.to_string_lossy().into_owned()),
    }));
    let (event_tx, mut event_rx) = mpsc::unbounded_channel::<RuntimeEvent>();
    let (outcome_tx, mut outcome_rx) = mpsc::unbounded_channel::<Settled>();
    let cancel = CancellationToken::new();
    let spawner = Spawner::new().map_err(RunError::Spawner)?;
    let spawner = spawner
        .clone()
        .with_sandbox(sandbox_context(&paths, &spawner).await);
    let reaping = tokio::spawn(reap_orphans(spawner.clone()));
    crate::support::memory::tune();
    tokio::spawn(crate::support::memory::after_bursts(
        status.subscribe(),
        cancel.clone(),
    ));
    let registry = Arc::new(Registry::default());
    let lsp = Arc::new(LspService::new(registry.clone()));
    let gateway = Gateway::new(
        registry,
        status.clone(),
        store.clone(),
        lsp.clone(),
        opts.gateway.config.clone(),
    );
    // Calls that need an idle MCP server say so here (see the main loop).
    let (demand_tx, mut demand_rx) = mpsc::unbounded_channel::<String>();
    gateway.set_demand(demand_tx);
    let stopped = stopped::read(&paths.stopped_file());
    // Secrets the servers reference, looked up before anything starts.
    let secrets_book = Arc::new(SecretBook::new(paths.home_dir.clone()));
    let (refreshed_tx, mut refreshed_rx) = mpsc::unbounded_channel::<secrets::Refreshed>();
    {
        let names: BTreeSet<String> = secrets::users(&store.snapshot()).into_keys().collect();
        if !names.is_empty() {
            secrets_book.refresh(&names, &names).await;
            tracing::info!(
                secrets = names.len(),
                backend = secrets_book.backend().map_or("none", |b| b.as_str()),
                "looked up the secrets the servers use"
            );
        }
    }
    // Before any client can attach: servers with a cached catalog are
    // listed at once.
    gateway.offer_cached(&stopped);
    let reconciler = Arc::new(Reconciler::new(
        store.clone(),
        status.clone(),
        spawner.clone(),
        opts.reconcile.clone(),
        stopped,
        gateway.clone(),
        Some(gateway.broadcast_hook()),
        dev_watcher.sources(),
        event_tx,
        outcome_tx,
        cancel.clone(),
        secrets_book.clone(),
    ));
    let queue = Arc::new(WorkQueue::<Key>::instrumented(metrics().queue()));
    metrics().attach(Observed {
        status: status.clone(),
        store: store.clone(),
        queue_depth: {
            let queue = Arc::downgrade(&queue);
            Box::new(move || queue.upgrade().map_or(0, |q| q.depth()))
        },
    });
    gateway.sign_ins().use_secrets(secrets_book.clone());
    let view = Arc::new(StatusView::new(
        store.clone(),
        status.clone(),
        gateway.clone(),
    ));
    let shared = Shared {
        store: store.clone(),
        status: status.clone(),
        reconciler: reconciler.clone(),
        queue: queue.clone(),
        lsp,
        view: view.clone(),
        pins: gateway.pins().clone(),
        gateway: gateway.clone(),
        secrets: secrets_book.clone(),
        refreshed: refreshed_tx,
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
    let listener = socket::bind(&socket_path).map_err(|source| RunError::Socket {
        path: socket_path.clone(),
        source,
    })?;
    let (control_tx, mut control_rx) = mpsc::channel::<Incoming>(16);
    let server = {
        let store = store.clone();
        let view = view.clone();
        tokio::spawn(control::server::serve(
            listener,
            control_tx,
            move |request, stream| streams::serve(request, stream, store.clone(), view.clone()),
        ))
    };

    // The agent endpoint: a Unix socket beside the control socket (for
    // `steward mcp`), optionally HTTP, optionally this process's stdio.
    let gateway_cancel = CancellationToken::new();
    let mcp_socket = paths.mcp_socket_path();
    let mcp_listener = socket::bind(&mcp_socket).map_err(|source| RunError::Socket {
        path: mcp_socket.clone(),
        source,
    })?;
    tokio::spawn(serve::serve_unix(
        gateway.clone(),
        mcp_listener,
        gateway_cancel.clone(),
    ));
    tokio::spawn(gateway.clone().run_broadcaster(gateway_cancel.clone()));
    if let Some(http) = http {
        let address = http.local_addr();
        gateway.set_listen(format!("http://{address}{}", serve::HTTP_PATH));
        tracing::info!(url = %format!("http://{address}{}", serve::HTTP_PATH), "agent endpoint listening");
        tokio::spawn(http.serve(gateway.clone(), gateway_cancel.clone()));
    }
    if let Some(scrapes) = scrapes {
        let url = format!(
            "http://{}{}",
            scrapes.local_addr(),
            crate::observe::metrics::http::PATH
        );
        tracing::info!(%url, "metrics endpoint listening");
        tokio::spawn(scrapes.serve(gateway_cancel.clone()));
    }
    // `steward mcp` as the controller: shut down once no client is left.
    let idle = CancellationToken::new();
    if let Some(profile) = opts.gateway.stdio {
        let gateway = gateway.clone();
        let cancel = gateway_cancel.clone();
        let idle = idle.clone();
        let resume = opts.gateway.stdio_resume.clone();
        tokio::spawn(async move {
            serve::serve_stream(
                gateway.clone(),
                "stdio",
                profile,
                resume,
                crate::gateway::handover::stdin(),
                crate::gateway::handover::stdout(),
                cancel,
            )
            .await;
            let mut attached = gateway.attached();
            let _ = attached.wait_for(|n| *n == 0).await;
            tracing::info!("the last agent client left");
            idle.cancel();
        });
    }

    // Cold start: everything is one reload.
    let mut tracker = ReloadTracker::default();
    let cold = shared.store.snapshot();
    let all = cold.keys();
    tracker.begin(
        "start",
        &all.iter().cloned().collect::<Vec<_>>(),
        cold.epoch,
        all.iter(),
    );
    if let Some(summary) = tracker.finish_if_done() {
        status.set_last_reload(summary);
    }
    shared.enqueue_all();
    tracing::info!(servers = all.len(), socket = %socket_path.display(), "controller running");

    let mut resync = tokio::time::interval(opts.resync);
    resync.tick().await;
    let mut dev_epoch = None;
    let mut auth_notices = crate::runtime::mcp::remote::oauth::notices();
    // Servers waiting for a sign-in: the stores are looked at for them.
    let mut auth_looks = tokio::time::interval(opts.reconcile.auth_recheck);
    let (looked_tx, mut looked_rx) = mpsc::unbounded_channel();
    loop {
        // Each new snapshot (a file, a request, a resync) may change what
        // is developed: the source watcher follows it.
        let snap = store.snapshot();
        if dev_epoch != Some(snap.epoch) {
            dev_epoch = Some(snap.epoch);
            dev_watcher.set_targets(dev_targets(&snap));
        }
        drop(snap);
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = idle.cancelled() => break,
            Some(FileChange { path, .. }) = changes.recv() => {
                let before = store.snapshot();
                let applied = store.apply_judged(&path);
                tracing::info!(source = %path.display(), changed = applied.changed.len(), "source changed");
                shared.apply(&before, &applied, &mut tracker, &path.to_string_lossy());
            }
            Some(event) = event_rx.recv() => queue.add(event.key),
            // A dev server's source changed (or its watch did).
            Some(key) = code_changes.recv() => queue.add(key),
            Some(path) = protected_created.recv() => {
                if path.symlink_metadata().is_ok() {
                    reconciler.protected_file_created(&path);
                }
            }
            Some(name) = demand_rx.recv() => {
                // A call waits for it: an idle server starts.
                let key = Key::mcp(&name);
                reconciler.demand(&key);
                queue.add(key);
            }
            Some(settled) = outcome_rx.recv() => {
                if let Some(summary) = tracker.outcome(&settled) {
                    log_reload(&summary);
                    let snap = store.snapshot();
                    for line in user_actions(&snap, &paths.trusted_folders)
                        .into_iter()
                        .chain(secrets::user_actions(&snap, &status))
                    {
                        tracing::info!("{line}");
                    }
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
            Some(refreshed) = refreshed_rx.recv() => {
                requests::secrets_refreshed(refreshed, &shared, &mut tracker, &paths);
            }
            Ok(notice) = auth_notices.recv() => auth::noticed(&shared, notice),
            _ = auth_looks.tick() => auth::look(&shared, looked_tx.clone()),
            Some(found) = looked_rx.recv() => auth::looked(&shared, found),
            _ = resync.tick() => {
                // Level-triggered: compare the files with the snapshot too,
                // in case the watcher missed a change.
                for path in store.watched_files() {
                    let before = store.snapshot();
                    if let Some(applied) = store.resync_file(&path) {
                        tracing::info!(source = %path.display(), changed = applied.changed.len(), "source changed unseen; applied by the resync");
                        shared.apply(&before, &applied, &mut tracker, "resync");
                    }
                }
                shared.enqueue_all();
                // A `dev.cwd` that was missing is looked for again.
                dev_epoch = None;
            }
        }
    }

    // Shutdown: hand the agents' sessions back (their requests answered
    // first), cancel queued and in-flight work, then stop every server.
    // A `steward run` started from now on (a restart) waits for us instead
    // of failing.
    workspace_lock.announce_stopping();
    lock.announce_stopping();
    tracing::info!("controller stopping");
    gateway
        .hand_back(crate::gateway::resume::HANDBACK_WAIT)
        .await;
    cancel.cancel();
    queue.shutdown();
    let _ = workers.await;
    reconciler.stop_all().await;
    gateway.flush_cache();
    gateway_cancel.cancel();
    let orphans = spawner.kill_orphans().await;
    if !orphans.is_empty() {
        tracing::warn!(?orphans, "killed descendants of servers that outlived them");
    }
    reaping.abort();
    reaper::forget_instance(&instance_file);
    server.abort();
    let _ = std::fs::remove_file(&socket_path);
    let _ = std::fs::remove_file(&mcp_socket);
    drop(lock);
    drop(workspace_lock);
    tracing::info!("controller stopped");
    Ok(())
}

/// The admitted servers of `snap` with `dev`: whose source to watch.
fn dev_targets(snap: &Snapshot) -> Vec<DevTarget> {
    snap.key_iter()
        .filter(|key| snap.blocked(key).is_none())
        .filter_map(|key| {
            let dev = match snap.get(key)? {
                Desired::Mcp(d) => d.spec.dev.clone(),
                Desired::Lsp(d) => d.spec.dev.clone(),
            }?;
            Some(DevTarget {
                key: key.clone(),
                root: PathBuf::from(dev.cwd),
                globs: dev.watch,
            })
        })
        .collect()
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

/// What the spawner's sandboxes need of this controller: the user's
/// directories, Steward's own (never reachable from a server), and what the
/// kernel offers (probed once, off the async threads).
async fn sandbox_context(
    paths: &Paths,
    spawner: &Spawner,
) -> crate::runtime::sandbox::SandboxContext {
    let shim = spawner.exec_shim().to_path_buf();
    let support =
        tokio::task::spawn_blocking(move || crate::runtime::sandbox::Support::detect(&shim))
            .await
            .unwrap_or(crate::runtime::sandbox::Support {
                abi: 0,
                userns: false,
            });
    #[allow(unsafe_code)]
    // SAFETY: getuid cannot fail and touches no memory.
    let uid = unsafe { libc::getuid() };
    crate::runtime::sandbox::SandboxContext {
        home: paths.user_home.clone(),
        home_dir: paths.home_dir.clone(),
        workspace: paths.workspace.clone(),
        hidden: vec![paths.home_dir.join("steward"), paths.runtime_dir.clone()],
        tmp_root: std::env::temp_dir().join(format!("steward-{uid}-sandbox")),
        homes: crate::runtime::sandbox::home::workspace_root(&paths.home_dir, &paths.workspace),
        support,
    }
}

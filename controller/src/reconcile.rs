//! Reconcile: drive one server toward its desired state.
//!
//! `reconcile(key)` receives only the key (kube-runtime: "the reason is not
//! passed on purpose — check everything"). It reads the latest snapshot and
//! what is observed for the key, and acts on the difference:
//! - not desired → stop what runs, forget the status (`removed`);
//! - not admitted (or stopped by the user) → stop what runs, `Blocked`;
//! - running with the desired `configHash` and alive → untouched (same pid,
//!   same connection); only filters and lists are refreshed;
//! - running with another hash, dead, or not running → stop the old, start
//!   the new, unless a backoff says "not yet".
//!
//! The work queue guarantees one reconcile per key at a time, so the
//! observed handle of a key is taken out of the map for the duration of its
//! reconcile without further locking. A failed start releases everything it
//! created and never records its hash as observed.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use steward_schema::admission::Blocked;
use steward_schema::resource::{ConditionStatus, McpServerSpec, Phase, Reason, ServerStatus};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backoff::{BackoffConfig, CrashLoop, CrashLoopConfig, KeyBackoff};
use crate::lsp_service::LspService;
use crate::queue::Requeue;
use crate::runtime::lsp::{LspConnection, LspEvent};
use crate::runtime::mcp::{self, McpConnection, McpEvent, McpTimeouts};
use crate::runtime::process::Spawner;
use crate::snapshot::{Desired, DesiredStore, Key};
use crate::status::{StatusStore, now_rfc3339, rfc3339, set_condition};

/// Timeouts and backoff parameters of the reconciler.
#[derive(Debug, Clone)]
pub struct ReconcileConfig {
    pub mcp: McpTimeouts,
    /// Bound on the protocol close before the process is signalled.
    pub close_timeout: Duration,
    /// SIGTERM → SIGKILL grace.
    pub stop_grace: Duration,
    pub backoff: BackoffConfig,
    pub crash: CrashLoopConfig,
}

impl Default for ReconcileConfig {
    fn default() -> Self {
        ReconcileConfig {
            mcp: McpTimeouts::default(),
            close_timeout: Duration::from_secs(2),
            stop_grace: Duration::from_secs(3),
            backoff: BackoffConfig::default(),
            crash: CrashLoopConfig::default(),
        }
    }
}

/// What one reconcile did to its key (feeds `status.controller.lastReload`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Added,
    Restarted,
    Unchanged,
    Removed,
    Failed,
    Skipped(Reason),
}

/// A live connection of either kind. A language server's connection is
/// shared with `steward lsp` queries (which hold it only for one bounded
/// request).
enum Conn {
    Mcp(Box<McpConnection>),
    Lsp(Arc<LspConnection>),
}

impl Conn {
    fn pid(&self) -> Option<u32> {
        match self {
            Conn::Mcp(c) => c.pid(),
            Conn::Lsp(c) => c.pid(),
        }
    }

    fn stderr_tail(&self, n: usize) -> Vec<String> {
        match self {
            Conn::Mcp(c) => c.stderr_tail(n),
            Conn::Lsp(c) => c.stderr_tail(n),
        }
    }

    async fn stop(self, config: &ReconcileConfig) {
        match self {
            Conn::Mcp(c) => c.stop(config.close_timeout, config.stop_grace).await,
            Conn::Lsp(mut c) => {
                // Queries hold a clone for at most one bounded request.
                let deadline = Instant::now() + config.close_timeout;
                loop {
                    match Arc::try_unwrap(c) {
                        Ok(conn) => return conn.stop(config.stop_grace).await,
                        Err(shared) if Instant::now() < deadline => {
                            c = shared;
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        // Still shared: dropping our handle kills the process
                        // group when the last query lets go.
                        Err(_) => return,
                    }
                }
            }
        }
    }
}

/// What runs for a key.
struct Observed {
    conn_id: u64,
    hash: String,
    generation: u64,
    conn: Conn,
    started_at: Instant,
    started_wall: SystemTime,
}

/// Something a live connection reported; routed back into the queue.
#[derive(Debug, Clone)]
pub struct RuntimeEvent {
    pub key: Key,
    pub conn_id: u64,
    pub dead: Option<String>,
}

#[derive(Debug, Default)]
struct Flags {
    dead: Option<String>,
    refresh: bool,
    /// `steward restart`: stop and start once, even though nothing changed.
    restart: bool,
}

/// The reconciler and everything it observes.
pub struct Reconciler {
    store: Arc<DesiredStore>,
    status: Arc<StatusStore>,
    spawner: Spawner,
    config: ReconcileConfig,
    observed: Mutex<HashMap<Key, Observed>>,
    flags: Mutex<HashMap<(Key, u64), Flags>>,
    backoff: Mutex<KeyBackoff<Key>>,
    crash: Mutex<CrashLoop<Key>>,
    stopped: Mutex<BTreeSet<Key>>,
    /// Language servers that failed for good under a hash (crash without
    /// `restartOnCrash`, or too many restarts): not started again until the
    /// spec changes or its source is saved again.
    held: Mutex<HashMap<Key, (String, Reason, String)>>,
    /// Crash restarts per language server under its current hash.
    lsp_crashes: Mutex<HashMap<Key, (String, u32)>>,
    lsp: Arc<LspService>,
    next_conn_id: AtomicU64,
    events: mpsc::UnboundedSender<RuntimeEvent>,
    outcomes: mpsc::UnboundedSender<(Key, Outcome)>,
    cancel: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn wall(at: Instant) -> SystemTime {
    let now = Instant::now();
    let sys = SystemTime::now();
    if at >= now {
        sys + (at - now)
    } else {
        sys - (now - at)
    }
}

fn with_tail(message: String, tail: &[String]) -> String {
    if tail.is_empty() {
        message
    } else {
        format!("{message}\nlast stderr lines:\n{}", tail.join("\n"))
    }
}

impl Reconciler {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Arc<DesiredStore>,
        status: Arc<StatusStore>,
        spawner: Spawner,
        config: ReconcileConfig,
        stopped: BTreeSet<Key>,
        lsp: Arc<LspService>,
        events: mpsc::UnboundedSender<RuntimeEvent>,
        outcomes: mpsc::UnboundedSender<(Key, Outcome)>,
        cancel: CancellationToken,
    ) -> Self {
        Reconciler {
            store,
            status,
            spawner,
            backoff: Mutex::new(KeyBackoff::new(config.backoff).unwrap_or_default()),
            crash: Mutex::new(CrashLoop::new(config.crash).unwrap_or_default()),
            config,
            observed: Mutex::new(HashMap::new()),
            flags: Mutex::new(HashMap::new()),
            stopped: Mutex::new(stopped),
            held: Mutex::new(HashMap::new()),
            lsp_crashes: Mutex::new(HashMap::new()),
            lsp,
            next_conn_id: AtomicU64::new(1),
            events,
            outcomes,
            cancel,
        }
    }

    /// A runtime event arrived for `key`: remember it for the next reconcile.
    pub fn note_event(&self, event: &RuntimeEvent) {
        let mut flags = lock(&self.flags);
        let f = flags.entry((event.key.clone(), event.conn_id)).or_default();
        match &event.dead {
            Some(msg) => f.dead = Some(msg.clone()),
            None => f.refresh = true,
        }
    }

    /// `steward restart`: the next reconcile of `key` stops what runs and
    /// starts it again (a failed server is retried at once).
    pub fn request_restart(&self, key: &Key) {
        self.retry_now(key);
        if let Some(conn_id) = lock(&self.observed).get(key).map(|o| o.conn_id) {
            lock(&self.flags)
                .entry((key.clone(), conn_id))
                .or_default()
                .restart = true;
        }
    }

    /// Forget any backoff of `key`: its spec changed, or its source was
    /// saved again (which retries a failed server at once).
    pub fn retry_now(&self, key: &Key) {
        lock(&self.backoff).reset(key);
        lock(&self.crash).reset(key);
        lock(&self.held).remove(key);
        lock(&self.lsp_crashes).remove(key);
    }

    /// Mark `key` stopped (or started) by the user.
    pub fn set_stopped(&self, key: &Key, stopped: bool) {
        let mut set = lock(&self.stopped);
        if stopped {
            set.insert(key.clone());
        } else {
            set.remove(key);
        }
    }

    pub fn stopped(&self) -> BTreeSet<Key> {
        lock(&self.stopped).clone()
    }

    /// Stop everything, in parallel (controller shutdown).
    pub async fn stop_all(&self) {
        let all: Vec<(Key, Observed)> = lock(&self.observed).drain().collect();
        futures::future::join_all(all.into_iter().map(|(key, o)| async move {
            tracing::info!(server = %key, "stopping");
            self.stop_conn(&key, o.conn).await;
        }))
        .await;
    }

    /// Stop a connection (taking a language server out of query routing first).
    async fn stop_conn(&self, key: &Key, conn: Conn) {
        if matches!(conn, Conn::Lsp(_)) {
            self.lsp.unpublish(&key.name);
        }
        conn.stop(&self.config).await;
    }

    fn report(&self, key: &Key, outcome: Outcome) {
        let _ = self.outcomes.send((key.clone(), outcome));
    }

    fn set_status(&self, key: &Key, f: impl FnOnce(&mut ServerStatus)) {
        self.status
            .update(key, || ServerStatus::new(Phase::Pending, None, None), f);
    }

    /// Reconcile one key. Never panics on server misbehaviour; returns when
    /// (and whether) to look again.
    pub async fn reconcile(self: Arc<Self>, key: Key) -> Requeue {
        let (requeue, outcome) = self.reconcile_inner(&key).await;
        if let Some(outcome) = outcome {
            self.report(&key, outcome);
        }
        requeue
    }

    async fn reconcile_inner(&self, key: &Key) -> (Requeue, Option<Outcome>) {
        let snap = self.store.snapshot();
        let observed = lock(&self.observed).remove(key);
        let flags = observed
            .as_ref()
            .and_then(|o| lock(&self.flags).remove(&(key.clone(), o.conn_id)))
            .unwrap_or_default();

        // Not desired any more: stop and forget.
        let Some(desired) = snap.get(key) else {
            if let Some(o) = observed {
                self.set_status(key, |s| s.phase = Phase::Stopping);
                self.stop_conn(key, o.conn).await;
            }
            self.status.remove(key);
            self.retry_now(key);
            self.lsp.forget(&key.name);
            return (Requeue::No, Some(Outcome::Removed));
        };
        let generation = snap.generation(key);
        let hash = desired.config_hash().to_owned();

        // Not admitted, or stopped by the user: nothing may run.
        let stopped_by_user = lock(&self.stopped).contains(key);
        let blocked = snap.blocked(key).cloned().or_else(|| {
            stopped_by_user.then(|| Blocked {
                reason: Reason::StoppedByUser,
                message: format!("stopped by the user; run `steward start {}`", key.name),
            })
        });
        if let Some(b) = blocked {
            if let Some(o) = observed {
                self.set_status(key, |s| s.phase = Phase::Stopping);
                self.stop_conn(key, o.conn).await;
            }
            let now = now_rfc3339();
            self.set_status(key, |s| {
                s.phase = Phase::Blocked;
                s.reason = Some(b.reason);
                s.message = Some(b.message.clone());
                s.pid = None;
                s.tools = None;
                s.prompts = None;
                s.capabilities = None;
                s.next_retry_at = None;
                s.started_at = None;
                set_condition(
                    &mut s.conditions,
                    "Admitted",
                    if b.reason == Reason::StoppedByUser {
                        ConditionStatus::True
                    } else {
                        ConditionStatus::False
                    },
                    Some(b.reason.as_str()),
                    Some(&b.message),
                    &now,
                );
                set_condition(
                    &mut s.conditions,
                    "Ready",
                    ConditionStatus::False,
                    Some(b.reason.as_str()),
                    None,
                    &now,
                );
            });
            return (Requeue::No, Some(Outcome::Skipped(b.reason)));
        }

        // Running the desired config and alive: leave it alone.
        if let Some(o) = observed {
            if o.hash == hash && flags.dead.is_none() && !flags.restart {
                if flags.refresh {
                    self.refresh(&o).await;
                }
                self.publish_ready(key, &desired, &o);
                lock(&self.crash).running(key, &o.hash, o.started_at, Instant::now());
                lock(&self.observed).insert(key.clone(), o);
                return (Requeue::No, Some(Outcome::Unchanged));
            }
            // Dead, or another config: stop the old one first.
            let tail = o.conn.stderr_tail(10);
            let crashed = flags.dead.clone();
            self.set_status(key, |s| s.phase = Phase::Stopping);
            let (old_hash, started_at) = (o.hash.clone(), o.started_at);
            self.stop_conn(key, o.conn).await;
            if let Some(msg) = crashed
                && old_hash == hash
            {
                return match desired {
                    Desired::Lsp(d) => self.lsp_crashed(
                        key,
                        &hash,
                        d.spec.restart_on_crash,
                        d.spec.max_restarts,
                        &msg,
                        &tail,
                    ),
                    Desired::Mcp(_) => self.crashed(key, &hash, started_at, &msg, &tail),
                };
            }
            return self.start(key, &desired, &hash, generation, true).await;
        }
        self.start(key, &desired, &hash, generation, false).await
    }

    /// Record a crash and decide when to start again (kubelet-style backoff).
    fn crashed(
        &self,
        key: &Key,
        hash: &str,
        started_at: Instant,
        msg: &str,
        tail: &[String],
    ) -> (Requeue, Option<Outcome>) {
        let now = Instant::now();
        let (delay, crashes) = {
            let mut crash = lock(&self.crash);
            let delay = crash.crashed(key, hash, started_at, now);
            (delay, crash.crashes(key, hash))
        };
        let retry_at = now + delay;
        let reason = if crashes > 1 {
            Reason::CrashLoopBackOff
        } else {
            Reason::Crashed
        };
        let message = with_tail(
            format!(
                "{msg}; restarting in {}",
                humantime::format_duration(Duration::from_secs(delay.as_secs().max(1)))
            ),
            tail,
        );
        tracing::warn!(server = %key, %msg, ?delay, "server crashed");
        let now_s = now_rfc3339();
        self.set_status(key, |s| {
            s.phase = Phase::Failed;
            s.reason = Some(reason);
            s.message = Some(message.clone());
            s.pid = None;
            s.restarts += 1;
            s.next_retry_at = Some(rfc3339(wall(retry_at)));
            s.started_at = None;
            set_condition(
                &mut s.conditions,
                "Ready",
                ConditionStatus::False,
                Some(reason.as_str()),
                Some(msg),
                &now_s,
            );
        });
        (Requeue::At(retry_at), Some(Outcome::Failed))
    }

    /// A language server exited: restart through the queue with
    /// `restartOnCrash`, up to `maxRestarts`; otherwise it stays `Failed`
    /// (held) until its spec changes or its source is saved again.
    fn lsp_crashed(
        &self,
        key: &Key,
        hash: &str,
        restart_on_crash: bool,
        max_restarts: u32,
        msg: &str,
        tail: &[String],
    ) -> (Requeue, Option<Outcome>) {
        let count = {
            let mut crashes = lock(&self.lsp_crashes);
            let entry = crashes
                .entry(key.clone())
                .or_insert_with(|| (hash.to_owned(), 0));
            if entry.0 != hash {
                *entry = (hash.to_owned(), 0);
            }
            entry.1 += 1;
            entry.1
        };
        let restart = restart_on_crash && count <= max_restarts;
        let (reason, message) = if restart {
            (
                Reason::Crashed,
                format!("{msg}; restarting ({count} of {max_restarts})"),
            )
        } else if restart_on_crash {
            (
                Reason::MaxRestartsExceeded,
                format!("{msg}; gave up after {max_restarts} restarts (save the file to retry)"),
            )
        } else {
            (
                Reason::Crashed,
                format!("{msg}; restartOnCrash is false (save the file to retry)"),
            )
        };
        let message = with_tail(message, tail);
        tracing::warn!(server = %key, %msg, restart, "language server crashed");
        let now_s = now_rfc3339();
        self.set_status(key, |s| {
            s.phase = Phase::Failed;
            s.reason = Some(reason);
            s.message = Some(message.clone());
            s.pid = None;
            s.started_at = None;
            if restart {
                s.restarts += 1;
            }
            set_condition(
                &mut s.conditions,
                "Ready",
                ConditionStatus::False,
                Some(reason.as_str()),
                Some(msg),
                &now_s,
            );
        });
        if restart {
            (Requeue::After(Duration::ZERO), Some(Outcome::Failed))
        } else {
            lock(&self.held).insert(key.clone(), (hash.to_owned(), reason, message));
            (Requeue::No, Some(Outcome::Failed))
        }
    }

    async fn start(
        &self,
        key: &Key,
        desired: &Desired<'_>,
        hash: &str,
        generation: u64,
        restarting: bool,
    ) -> (Requeue, Option<Outcome>) {
        if lock(&self.held).get(key).is_some_and(|(h, _, _)| h == hash) {
            // Failed for good under this hash; a save or spec change retries.
            return (Requeue::No, None);
        }
        let now = Instant::now();
        // A backoff still running (start failure or crash loop) says "not yet".
        let not_before = {
            let b = lock(&self.backoff)
                .next_retry_at(key)
                .filter(|at| *at > now);
            let c = lock(&self.crash)
                .next_retry_at(key, hash)
                .filter(|at| *at > now);
            b.max(c)
        };
        if let Some(at) = not_before {
            self.set_status(key, |s| s.next_retry_at = Some(rfc3339(wall(at))));
            return (Requeue::At(at), None);
        }

        let now_s = now_rfc3339();
        self.set_status(key, |s| {
            s.phase = Phase::Starting;
            s.reason = None;
            s.message = None;
            s.pid = None;
            s.next_retry_at = None;
            set_condition(
                &mut s.conditions,
                "Admitted",
                ConditionStatus::True,
                Some("Admitted"),
                None,
                &now_s,
            );
        });
        let conn_id = self.next_conn_id.fetch_add(1, Ordering::Relaxed);
        let attempted_at = Instant::now();
        let started = tokio::select! {
            r = self.connect(key, desired, conn_id) => r,
            () = self.cancel.cancelled() => Err((Reason::StartFailed, "the controller is shutting down".to_owned())),
        };
        match started {
            Ok(conn) => {
                let o = Observed {
                    conn_id,
                    hash: hash.to_owned(),
                    generation,
                    conn,
                    started_at: Instant::now(),
                    started_wall: SystemTime::now(),
                };
                lock(&self.backoff).succeeded(key);
                self.publish_ready(key, desired, &o);
                tracing::info!(server = %key, pid = o.conn.pid(), "ready");
                lock(&self.observed).insert(key.clone(), o);
                let outcome = if restarting {
                    Outcome::Restarted
                } else {
                    Outcome::Added
                };
                (Requeue::No, Some(outcome))
            }
            Err((reason, message)) => {
                let retry_at =
                    lock(&self.backoff).failed_attempt(key, attempted_at, Instant::now());
                tracing::warn!(server = %key, %reason, %message, "start failed");
                let now_s = now_rfc3339();
                self.set_status(key, |s| {
                    s.phase = Phase::Failed;
                    s.reason = Some(reason);
                    s.message = Some(message.clone());
                    s.pid = None;
                    s.tools = None;
                    s.prompts = None;
                    s.next_retry_at = Some(rfc3339(wall(retry_at)));
                    set_condition(
                        &mut s.conditions,
                        "Ready",
                        ConditionStatus::False,
                        Some(reason.as_str()),
                        Some(&message),
                        &now_s,
                    );
                });
                if self.cancel.is_cancelled() {
                    return (Requeue::No, Some(Outcome::Failed));
                }
                (Requeue::At(retry_at), Some(Outcome::Failed))
            }
        }
    }

    async fn connect(
        &self,
        key: &Key,
        desired: &Desired<'_>,
        conn_id: u64,
    ) -> Result<Conn, (Reason, String)> {
        // Every process of the key writes its stderr to the key's log too.
        let spawner = self.spawner.with_stderr_sink(self.status.logs().sink(key));
        match desired {
            Desired::Mcp(d) => {
                let events = self.events.clone();
                let ev_key = key.clone();
                let on_event = Arc::new(move |e: McpEvent| {
                    let dead = match e {
                        McpEvent::ToolsChanged | McpEvent::PromptsChanged => None,
                        McpEvent::Exited(info) => Some(format!("the server exited ({info})")),
                        McpEvent::Unresponsive(msg) => {
                            Some(format!("the server stopped answering: {msg}"))
                        }
                    };
                    let _ = events.send(RuntimeEvent {
                        key: ev_key.clone(),
                        conn_id,
                        dead,
                    });
                });
                McpConnection::connect(
                    &spawner,
                    &key.name,
                    &d.spec,
                    &self.store.paths().workspace,
                    self.config.mcp,
                    on_event,
                )
                .await
                .map(|c| Conn::Mcp(Box::new(c)))
                .map_err(|e| (e.reason, e.message))
            }
            Desired::Lsp(d) => {
                let events = self.events.clone();
                let ev_key = key.clone();
                let on_event = Arc::new(move |e: LspEvent| {
                    if let LspEvent::Exited(how) = e {
                        let _ = events.send(RuntimeEvent {
                            key: ev_key.clone(),
                            conn_id,
                            dead: Some(format!("the server {how}")),
                        });
                    }
                });
                let conn = LspConnection::connect(&spawner, &key.name, &d.spec, on_event)
                    .await
                    .map_err(|e| (e.reason, e.message))?;
                let conn = Arc::new(conn);
                // Replay tracked documents before the start counts as done.
                self.lsp.publish(&key.name, conn.clone()).await;
                Ok(Conn::Lsp(conn))
            }
        }
    }

    async fn refresh(&self, o: &Observed) {
        if let Conn::Mcp(c) = &o.conn
            && let Err(e) = c.refresh().await
        {
            tracing::warn!(%e, "could not refresh the tool list");
        }
    }

    fn publish_ready(&self, key: &Key, desired: &Desired<'_>, o: &Observed) {
        let now_s = now_rfc3339();
        let capabilities = match &o.conn {
            Conn::Lsp(c) => Some(c.capabilities()),
            Conn::Mcp(_) => None,
        };
        let (tools, prompts) = match (&o.conn, desired) {
            (Conn::Mcp(c), Desired::Mcp(d)) => {
                let spec: &McpServerSpec = &d.spec;
                (
                    Some(mcp::filter_tools(
                        &c.tools(),
                        spec.include_tools.as_deref(),
                        spec.exclude_tools.as_deref(),
                    )),
                    Some(c.prompts()),
                )
            }
            _ => (None, None),
        };
        let started = rfc3339(o.started_wall);
        self.set_status(key, |s| {
            s.phase = Phase::Ready;
            s.reason = None;
            s.message = None;
            s.pid = o.conn.pid();
            s.observed_generation = Some(o.generation);
            s.observed_hash = Some(o.hash.clone());
            s.tools = tools;
            s.prompts = prompts;
            s.capabilities = capabilities;
            s.next_retry_at = None;
            s.started_at = Some(started);
            set_condition(
                &mut s.conditions,
                "Admitted",
                ConditionStatus::True,
                Some("Admitted"),
                None,
                &now_s,
            );
            set_condition(
                &mut s.conditions,
                "Ready",
                ConditionStatus::True,
                Some("Ready"),
                None,
                &now_s,
            );
        });
    }
}

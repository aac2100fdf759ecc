//! Reconcile: drive one server toward its desired state — decide and
//! launch, never wait.
//!
//! `reconcile(key)` receives only the key (kube-runtime: "the reason is not
//! passed on purpose — check everything"). It reads the latest snapshot and
//! the key's instances ([`crate::engine::instance`]) and acts on the difference:
//! - not desired → ask the instance to stop, forget the status once it has;
//! - not admitted (or stopped by the user) → ask it to stop now, `Blocked`;
//! - an instance of the desired `configHash` → follow its phase: `Starting`
//!   (pid shown), `Ready` (status, registry), `Failed` / `Exited` (backoff,
//!   crash loop, then a new instance when due);
//! - an instance of another hash → ask it to stop (a Ready MCP server drains
//!   its calls first) and start the new spec once it has stopped, so there is
//!   never a second process of one server; a handshake still running is
//!   dropped at once;
//! - nothing running → launch an instance, unless a backoff says "not yet",
//!   or the server may stay `Idle`: `--start lazy` (never started) or
//!   `--idle-stop` (stopped after no call used it for that long), no call
//!   has demanded it since ([`Reconciler::demand`]), and the catalog cache
//!   holds a catalog of it (listed instead: the one of its current
//!   `configHash` or, after a config edit of an idle server, of the
//!   configuration it last ran — the edit updates its spec without starting
//!   it; a server never run must run once to be known);
//! - a Ready MCP server with `--idle-stop` is looked at again at its idle
//!   deadline (its relay knows the last call and the calls in flight).
//! - a `dev` server whose source changed → build it, then replace what
//!   runs as for a new configuration; a failed build keeps it ([`dev`]).
//!
//! Lazy start and idle stop live in [`idle`], the `dev` step in [`dev`].
//!
//! Nothing here awaits a process: handshakes, drains, grace periods and
//! reaping run in the instances' tasks, whose phase changes come back as
//! events that enqueue the key. So a worker is held for microseconds, cold
//! start is bounded by the machine, and a security gate is never stuck
//! behind a slow server. The work queue guarantees one reconcile per key at a
//! time, so a key's slot is taken out of the map for the reconcile.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use steward_schema::admission::Blocked;
use steward_schema::resource::{ConditionStatus, Phase, Reason, ResourceKind, ServerStatus};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::desired::snapshot::{Desired, DesiredStore, Key};
use crate::engine::backoff::{
    BackoffConfig, CrashLoop, CrashLoopConfig, KeyBackoff, LspCrash, LspRestarts,
};
use crate::engine::instance::{
    Instance, InstanceContext, InstancePhase, Offer, ReadyView, RuntimeEvent, StopMode,
};
use crate::engine::publish::Publish;
use crate::engine::queue::Requeue;
use crate::engine::sandboxed;
use crate::engine::secrets;
use crate::engine::watch::dev::DevSources;
use crate::observe::clock::{now_rfc3339, rfc3339, wall};
use crate::observe::metrics::{kind_label, metrics};
use crate::observe::status::{StatusStore, set_condition};
use crate::observe::trace::TARGET;
use crate::runtime::first_line;
use crate::runtime::mcp::{Broadcast, McpTimeouts};
use crate::runtime::process::Spawner;
use crate::runtime::secrets::book::SecretBook;
use crate::runtime::start::{StartError, message_with_tail};
use crate::support::sync::lock;

mod dev;
mod idle;

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
    /// When MCP servers start (`--start`).
    pub start: StartMode,
    /// Stop an MCP server no call has used for this long (`--idle-stop`).
    pub idle_stop: Option<Duration>,
}

/// When MCP servers start (`--start`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StartMode {
    /// Every admitted server at once (today's behaviour).
    #[default]
    Eager,
    /// A server with a cached catalog at the first call that needs it.
    Lazy,
}

impl Default for ReconcileConfig {
    fn default() -> Self {
        ReconcileConfig {
            mcp: McpTimeouts::default(),
            close_timeout: Duration::from_secs(2),
            stop_grace: Duration::from_secs(3),
            backoff: BackoffConfig::default(),
            crash: CrashLoopConfig::default(),
            start: StartMode::Eager,
            idle_stop: None,
        }
    }
}

/// What one reconcile settled for its key (feeds `status.controller.lastReload`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Added,
    Restarted,
    Unchanged,
    Removed,
    Failed,
    Skipped(Reason),
    /// Admitted and idle (`NotStarted`, `IdleStopped`): settled, not failed.
    Idle,
}

/// An outcome and the snapshot it was decided on (an outcome of an older
/// snapshot never completes a newer reload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    pub key: Key,
    pub outcome: Outcome,
    pub epoch: u64,
}

/// How `steward restart` stops what runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// As a config edit does: calls in flight finish first (bounded by the
    /// entry's `timeout`).
    Graceful,
    /// At once (`--now`): calls in flight are answered with an error.
    Now,
}

/// What runs for a key: at most one current instance, and older ones still
/// stopping (never started beside: a new instance waits for them).
#[derive(Debug, Default)]
struct Slot {
    current: Option<Instance>,
    retiring: Vec<Instance>,
    /// The instance whose readiness was already published and reported.
    published: Option<u64>,
    /// The last instance failed or crashed: the next start is a retry
    /// (`status.restarts` counts it).
    retrying: bool,
    /// `steward restart`: stop what runs and start it again once; `now`
    /// (`--now`) does not wait for the calls in flight.
    restart: Option<Restart>,
    /// The next instance replaces a stopped one (a restart, not an add).
    replacing: bool,
    /// Stopped by `--idle-stop`: stays idle until a call demands it.
    idle_stopped: bool,
    /// A `dev` server's code: its build, what is built ([`dev`]).
    dev: dev::DevSlot,
}

impl Slot {
    fn is_empty(&self) -> bool {
        self.current.is_none()
            && self.retiring.is_empty()
            && !self.retrying
            && self.restart.is_none()
            && !self.idle_stopped
            && self.dev.is_empty()
    }
}

/// The reconciler and everything it observes.
pub struct Reconciler {
    store: Arc<DesiredStore>,
    status: Arc<StatusStore>,
    context: Arc<InstanceContext>,
    slots: Mutex<HashMap<Key, Slot>>,
    backoff: Mutex<KeyBackoff<Key>>,
    crash: Mutex<CrashLoop<Key>>,
    stopped: Mutex<BTreeSet<Key>>,
    /// Language servers that failed for good under a hash (crash without
    /// `restartOnCrash`, or too many restarts): not started again until the
    /// spec changes or its source is saved again.
    held: Mutex<HashMap<Key, String>>,
    /// Crash restarts per language server under its current hash.
    lsp_crashes: Mutex<LspRestarts<Key>>,
    /// Where live connections go (the agent endpoint).
    publish: Arc<dyn Publish>,
    /// What the source watcher saw of `dev` servers' code.
    dev_sources: Arc<DevSources>,
    next_id: AtomicU64,
    /// MCP servers that run or must run: launched, or demanded by a call
    /// (see [`Self::demand`]); an idle stop forgets the key.
    wanted: Mutex<BTreeSet<Key>>,
    start: StartMode,
    idle_stop: Option<Duration>,
    outcomes: mpsc::UnboundedSender<Settled>,
    cancel: CancellationToken,
    /// The values of `${secret:NAME}` references, as last looked up.
    secrets: Arc<SecretBook>,
}

/// `Failed` for `reason`: the message shown (ending with the server's last
/// stderr lines, also kept apart), no process, and the `Ready` condition
/// False with `condition_message` (the first line of the story).
fn mark_failed(
    s: &mut ServerStatus,
    reason: Reason,
    message: &str,
    tail: &[String],
    condition_message: &str,
) {
    s.phase = Phase::Failed;
    s.reason = Some(reason);
    s.message = Some(message_with_tail(message, tail));
    s.stderr_tail = tail.to_vec();
    s.pid = None;
    set_condition(
        &mut s.conditions,
        "Ready",
        ConditionStatus::False,
        Some(reason.as_str()),
        Some(condition_message),
        &now_rfc3339(),
    );
}

/// Where a decision leaves the key.
type Decision = (Requeue, Option<Outcome>);

impl Reconciler {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Arc<DesiredStore>,
        status: Arc<StatusStore>,
        spawner: Spawner,
        config: ReconcileConfig,
        stopped: BTreeSet<Key>,
        publish: Arc<dyn Publish>,
        broadcast: Option<Broadcast>,
        dev_sources: Arc<DevSources>,
        events: mpsc::UnboundedSender<RuntimeEvent>,
        outcomes: mpsc::UnboundedSender<Settled>,
        cancel: CancellationToken,
        secrets: Arc<SecretBook>,
    ) -> Self {
        let context = Arc::new(InstanceContext {
            spawner,
            workspace: store.paths().workspace.clone(),
            mcp: config.mcp,
            close_timeout: config.close_timeout,
            stop_grace: config.stop_grace,
            publish: publish.clone(),
            broadcast,
            events,
            status: status.clone(),
        });
        let (start, idle_stop) = (config.start, config.idle_stop);
        Reconciler {
            store,
            status,
            backoff: Mutex::new(KeyBackoff::new(config.backoff).unwrap_or_default()),
            crash: Mutex::new(CrashLoop::new(config.crash).unwrap_or_default()),
            context,
            slots: Mutex::new(HashMap::new()),
            stopped: Mutex::new(stopped),
            held: Mutex::new(HashMap::new()),
            lsp_crashes: Mutex::new(LspRestarts::default()),
            publish,
            dev_sources,
            next_id: AtomicU64::new(1),
            wanted: Mutex::new(BTreeSet::new()),
            start,
            idle_stop,
            outcomes,
            cancel,
            secrets,
        }
    }

    /// `steward restart`: the next reconcile of `key` stops what runs and
    /// starts it again (a failed server is retried at once).
    pub fn request_restart(&self, key: &Key, how: Restart) {
        self.retry_now(key);
        lock(&self.wanted).insert(key.clone());
        lock(&self.slots).entry(key.clone()).or_default().restart = Some(how);
    }

    /// A call needs MCP server `key` (the agent endpoint's demand, through
    /// the main loop): an idle server is started by its next reconcile.
    /// A code-running file appeared in the workspace: the ready servers
    /// that could have made it are told (see `sandboxed`).
    pub fn protected_file_created(&self, path: &std::path::Path) {
        let ready: Vec<(Key, Arc<ReadyView>)> = lock(&self.slots)
            .iter()
            .filter_map(|(key, slot)| match slot.current.as_ref()?.phase() {
                InstancePhase::Ready(view) => Some((key.clone(), view)),
                _ => None,
            })
            .collect();
        for (key, view) in ready {
            sandboxed::protected_file_created(
                &self.status,
                &key,
                (&view.unpinned, &view.noted),
                path,
            );
        }
    }

    pub fn demand(&self, key: &Key) {
        lock(&self.wanted).insert(key.clone());
    }

    /// Forget any backoff of `key`: its spec changed, or its source was
    /// saved again (which retries a failed server at once).
    pub fn retry_now(&self, key: &Key) {
        lock(&self.backoff).reset(key);
        lock(&self.crash).reset(key);
        lock(&self.held).remove(key);
        lock(&self.lsp_crashes).forget(key);
    }

    /// How many keys the reconciler holds state for (slots, backoffs,
    /// crash loops, held and crash-counted language servers); a removed
    /// server leaves none once its process is gone.
    #[cfg(test)]
    pub fn keys_with_state(&self) -> usize {
        lock(&self.slots).len()
            + lock(&self.backoff).tracked_keys()
            + lock(&self.crash).tracked_names()
            + lock(&self.held).len()
            + lock(&self.lsp_crashes).len()
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

    /// Stop everything, in parallel, and wait until every process is reaped
    /// (controller shutdown).
    pub async fn stop_all(&self) {
        let slots: Vec<(Key, Slot)> = lock(&self.slots).drain().collect();
        let mut instances = Vec::new();
        let mut builds = Vec::new();
        for (key, mut slot) in slots {
            builds.extend(slot.dev.cancel());
            if slot.current.is_some() {
                tracing::info!(server = %key, "stopping");
            }
            self.withdraw(&key);
            instances.extend(slot.current);
            instances.extend(slot.retiring);
        }
        for instance in &mut instances {
            instance.stop(StopMode::Now);
        }
        futures::future::join_all(instances.into_iter().map(Instance::join)).await;
        // A build stopped mid-way is reaped before its task ends.
        futures::future::join_all(builds).await;
    }

    fn set_status(&self, key: &Key, f: impl FnOnce(&mut ServerStatus)) {
        self.status
            .update(key, || ServerStatus::new(Phase::Pending, None, None), f);
    }

    /// Take `key` out of call and query routing.
    fn withdraw(&self, key: &Key) {
        match key.kind {
            ResourceKind::McpServer => self.publish.mcp_stopping(&key.name),
            ResourceKind::LspServer => self.publish.lsp_withdrawn(&key.name),
        }
    }

    /// Reconcile one key: decide, launch or ask to stop, and return when to
    /// look again. Never waits on a server.
    pub async fn reconcile(self: Arc<Self>, key: Key) -> Requeue {
        let span = tracing::trace_span!(
            target: TARGET,
            "reconcile",
            kind = kind_label(key.kind),
            name = %key.name,
            decision = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        let _entered = span.enter();
        let snap = self.store.snapshot();
        let mut slot = lock(&self.slots).remove(&key).unwrap_or_default();
        slot.retiring.retain(|i| !i.phase().is_finished());
        let (requeue, outcome) = self.decide(&key, &snap, &mut slot);
        let failed = outcome == Some(Outcome::Failed);
        let result = match requeue {
            _ if failed => "error",
            Requeue::No => "success",
            Requeue::After(_) | Requeue::At(_) => "requeue",
        };
        metrics().reconciled(key.kind, result, failed);
        span.record("decision", result);
        if let Some(outcome) = &outcome {
            span.record("outcome", tracing::field::debug(outcome));
        }
        if !slot.is_empty() {
            lock(&self.slots).insert(key.clone(), slot);
        }
        if let Some(outcome) = outcome {
            let _ = self.outcomes.send(Settled {
                key,
                outcome,
                epoch: snap.epoch,
            });
        }
        requeue
    }

    fn decide(
        &self,
        key: &Key,
        snap: &crate::desired::snapshot::Snapshot,
        slot: &mut Slot,
    ) -> Decision {
        // Not desired any more: stop, and forget once nothing runs.
        let Some(desired) = snap.get(key) else {
            self.retire(key, slot, StopMode::Now);
            slot.retrying = false;
            slot.idle_stopped = false;
            std::mem::take(&mut slot.dev).cancel();
            lock(&self.wanted).remove(key);
            self.retry_now(key);
            match key.kind {
                ResourceKind::McpServer => self.publish.mcp_removed(&key.name),
                ResourceKind::LspServer => self.publish.lsp_removed(&key.name),
            }
            if slot.retiring.is_empty() {
                self.status.remove(key);
            } else {
                self.set_status(key, |s| s.phase = Phase::Stopping);
            }
            return (Requeue::No, Some(Outcome::Removed));
        };
        let generation = snap.generation(key);
        let hash = desired.config_hash().to_owned();

        // Not admitted, or stopped by the user: nothing may run.
        let stopped_by_user = lock(&self.stopped).contains(key);
        // Then its secrets: the spec the server gets, or why not now.
        let runnable = secrets::runnable(&self.secrets, &self.context.workspace, key, &desired);
        let blocked = snap.blocked(key).cloned().or_else(|| {
            stopped_by_user.then(|| Blocked {
                reason: Reason::StoppedByUser,
                message: format!("stopped by the user; run `steward start {}`", key.name),
            })
        });
        let blocked = blocked.or_else(|| runnable.as_ref().err().and_then(secrets::blocked));
        if let Some(b) = blocked {
            self.retire(key, slot, StopMode::Now);
            // An idle server's cached listing goes too (blocked wins).
            self.withdraw(key);
            slot.dev.cancel();
            slot.retrying = false;
            slot.idle_stopped = false;
            lock(&self.wanted).remove(key);
            self.set_blocked(key, &b);
            return (Requeue::No, Some(Outcome::Skipped(b.reason)));
        }

        // Secrets not looked up yet: the key comes back then; what runs stays.
        let Ok(runnable) = runnable else {
            return (Requeue::No, None);
        };

        // A graceful replacement lets a Ready MCP server finish its calls
        // in flight first: none is cut off, none is sent again.
        let drain = match &desired {
            Desired::Mcp(d) => StopMode::Drain(d.spec.call_timeout()),
            Desired::Lsp(_) => StopMode::Now,
        };

        // `steward restart`: the running instance makes way for a new one.
        if let Some(how) = slot.restart.take()
            && slot.current.is_some()
        {
            let mode = match how {
                Restart::Graceful => drain,
                Restart::Now => StopMode::Now,
            };
            self.replace(key, slot, mode);
            return (Requeue::After(Duration::ZERO), None);
        }

        // Other values (a new spec, a rotated secret): stop it; the new one
        // starts once it has stopped. Only written otherwise (a literal
        // moved into a secret): it runs on.
        if let Some(current) = slot.current.as_mut() {
            if current.effective != runnable.effective {
                self.replace(key, slot, drain);
                self.retry_now(key);
            } else {
                (current.hash, current.generation) = (hash.clone(), generation);
            }
        }
        // A `dev` server whose source changed: build, then replace.
        if let Some(decision) = self.dev_step(key, &desired, &runnable.spec, slot, drain) {
            return decision;
        }

        if let Some(current) = &slot.current {
            match current.phase() {
                InstancePhase::Starting { pid } => {
                    self.set_status(key, |s| {
                        s.phase = Phase::Starting;
                        s.pid = pid;
                    });
                    return (Requeue::No, None);
                }
                InstancePhase::Ready(view) => {
                    let first = slot.published != Some(current.id);
                    let replaces = current.replaces;
                    self.publish_ready(key, &desired, current, &view);
                    lock(&self.crash).running(key, &hash, view.started_at, Instant::now());
                    let outcome = if first {
                        sandboxed::warn_partial(&self.status, key, view.sandbox.as_ref());
                        slot.published = Some(current.id);
                        slot.retrying = false;
                        lock(&self.backoff).succeeded(key);
                        if replaces {
                            Outcome::Restarted
                        } else {
                            Outcome::Added
                        }
                    } else {
                        Outcome::Unchanged
                    };
                    let requeue = match (&desired, self.idle_stop) {
                        (Desired::Mcp(d), Some(idle)) => {
                            self.idle_check(key, &d.spec, slot, &view, idle)
                        }
                        _ => Requeue::No,
                    };
                    return (requeue, Some(outcome));
                }
                InstancePhase::Failed(error) => {
                    let attempted_at = Instant::now();
                    slot.current = None;
                    slot.retrying = true;
                    return self.start_failed(key, &error, attempted_at);
                }
                InstancePhase::Exited {
                    message,
                    tail,
                    started_at,
                } => {
                    slot.current = None;
                    slot.retrying = true;
                    self.withdraw(key);
                    return match &desired {
                        Desired::Lsp(d) => self.lsp_crashed(
                            key,
                            &hash,
                            d.spec.restart_on_crash,
                            d.spec.max_restarts,
                            &message,
                            &tail,
                        ),
                        Desired::Mcp(_) => self.crashed(key, &hash, started_at, &message, &tail),
                    };
                }
                InstancePhase::Stopped => slot.current = None,
            }
        }

        // Nothing current. An older instance still stopping comes first.
        if !slot.retiring.is_empty() {
            self.set_status(key, |s| {
                s.phase = Phase::Stopping;
                s.pid = None;
            });
            return (Requeue::No, None);
        }
        if let Desired::Mcp(d) = &desired
            && let Some(reason) = self.stays_idle(key, slot)
            && let Some(catalog) = self.publish.mcp_idle(&key.name, &d.spec)
        {
            self.set_idle(key, reason, &d.spec, &catalog);
            return (Requeue::No, Some(Outcome::Idle));
        }
        self.launch(key, runnable, &hash, generation, slot)
    }

    /// Ask the current instance to stop (`mode`) and keep it until it has.
    fn retire(&self, key: &Key, slot: &mut Slot, mode: StopMode) {
        if let Some(mut instance) = slot.current.take() {
            self.withdraw(key);
            self.set_status(key, |s| s.phase = Phase::Stopping);
            instance.stop(mode);
            slot.retiring.push(instance);
        }
        // A drain in progress is cut short by a gate or a removal.
        if mode == StopMode::Now {
            for instance in &mut slot.retiring {
                instance.stop(StopMode::Now);
            }
        }
        slot.published = None;
    }

    /// A configuration change: the current instance makes way for the new
    /// spec; new calls wait for it while the old one drains.
    fn replace(&self, key: &Key, slot: &mut Slot, mode: StopMode) {
        let Some(mut instance) = slot.current.take() else {
            return;
        };
        let ready = matches!(instance.phase(), InstancePhase::Ready(_));
        match key.kind {
            ResourceKind::McpServer if ready => self.publish.mcp_restarting(&key.name),
            _ => self.withdraw(key),
        }
        // A handshake still running is dropped at once.
        instance.stop(if ready { mode } else { StopMode::Now });
        self.set_status(key, |s| s.phase = Phase::Stopping);
        slot.retiring.push(instance);
        slot.published = None;
        slot.retrying = false;
        slot.replacing = true;
    }

    fn set_blocked(&self, key: &Key, b: &Blocked) {
        let now = now_rfc3339();
        self.set_status(key, |s| {
            s.phase = Phase::Blocked;
            s.reason = Some(b.reason);
            s.message = Some(b.message.clone());
            s.stderr_tail.clear();
            s.pid = None;
            s.tools = None;
            s.prompts = None;
            s.capabilities = None;
            s.next_retry_at = None;
            s.started_at = None;
            // Not watched while it may not run.
            s.dev = None;
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
    }

    /// Start a new instance, unless the server is held or backing off.
    fn launch(
        &self,
        key: &Key,
        runnable: secrets::Runnable,
        hash: &str,
        generation: u64,
        slot: &mut Slot,
    ) -> Decision {
        if self.cancel.is_cancelled() {
            return (Requeue::No, None);
        }
        if lock(&self.held).get(key).is_some_and(|h| h == hash) {
            // Failed for good under this hash; a save or spec change retries.
            return (Requeue::No, None);
        }
        let now = Instant::now();
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
        let replaces = std::mem::take(&mut slot.replacing)
            || self
                .status
                .get(key)
                .and_then(|s| s.observed_hash)
                .is_some_and(|observed| observed != hash);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let retry = slot.retrying;
        // Running now: it stays wanted (restarted after a crash, say) until
        // an idle stop.
        slot.idle_stopped = false;
        if key.kind == ResourceKind::McpServer {
            lock(&self.wanted).insert(key.clone());
        }
        if retry {
            metrics().restarted(key.kind, &key.name);
        }
        let now_s = now_rfc3339();
        self.set_status(key, |s| {
            s.phase = Phase::Starting;
            s.reason = None;
            s.message = None;
            s.stderr_tail.clear();
            s.pid = None;
            s.next_retry_at = None;
            if retry {
                s.restarts += 1;
            }
            set_condition(
                &mut s.conditions,
                "Admitted",
                ConditionStatus::True,
                Some("Admitted"),
                None,
                &now_s,
            );
        });
        let mut instance = Instance::launch(
            &self.context,
            key,
            runnable.spec,
            runnable.effective,
            id,
            generation,
            replaces,
        );
        instance.code = slot.dev.built;
        slot.current = Some(instance);
        slot.published = None;
        (Requeue::No, None)
    }

    /// A start failed: back off (counting only attempts made after their delay).
    fn start_failed(&self, key: &Key, error: &StartError, attempted_at: Instant) -> Decision {
        let (reason, message) = (error.reason, error.to_string());
        let message = message.as_str();
        match key.kind {
            ResourceKind::McpServer => self.publish.mcp_withdrawn(&key.name),
            ResourceKind::LspServer => self.publish.lsp_withdrawn(&key.name),
        }
        let retry_at = lock(&self.backoff).failed_attempt(key, attempted_at, Instant::now());
        // The same failure again (a retry in back-off) is not news: once at
        // WARN, then at DEBUG, so a server that cannot start does not flood
        // the log.
        let repeated = self.status.get(key).is_some_and(|s| {
            s.phase == Phase::Failed
                && s.reason == Some(reason)
                && s.message.as_deref() == Some(message)
        });
        if repeated {
            tracing::debug!(server = %key, %reason, message = %first_line(message), "start failed again");
        } else {
            tracing::warn!(server = %key, %reason, message = %first_line(message), "start failed");
        }
        self.set_status(key, |s| {
            mark_failed(s, reason, &error.message, &error.stderr_tail, message);
            s.tools = None;
            s.prompts = None;
            s.next_retry_at = Some(rfc3339(wall(retry_at)));
        });
        if self.cancel.is_cancelled() {
            return (Requeue::No, Some(Outcome::Failed));
        }
        (Requeue::At(retry_at), Some(Outcome::Failed))
    }

    /// Record a crash and decide when to start again (kubelet-style backoff).
    fn crashed(
        &self,
        key: &Key,
        hash: &str,
        started_at: Instant,
        msg: &str,
        tail: &[String],
    ) -> Decision {
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
        let when = if delay.is_zero() {
            "restarting now".to_owned()
        } else {
            format!(
                "restarting in {}",
                humantime::format_duration(Duration::from_secs(delay.as_secs().max(1)))
            )
        };
        let message = format!("{msg}; {when}");
        tracing::warn!(server = %key, %msg, ?delay, "server crashed");
        self.set_status(key, |s| {
            mark_failed(s, reason, &message, tail, msg);
            s.tools = None;
            s.prompts = None;
            s.next_retry_at = Some(rfc3339(wall(retry_at)));
            s.started_at = None;
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
    ) -> Decision {
        let crash = lock(&self.lsp_crashes).crashed(key, hash, restart_on_crash, max_restarts);
        let restart = matches!(crash, LspCrash::Restart { .. });
        let (reason, message) = match crash {
            LspCrash::Restart { count, max } => (
                Reason::Crashed,
                format!("{msg}; restarting ({count} of {max})"),
            ),
            LspCrash::GaveUp { max } => (
                Reason::MaxRestartsExceeded,
                format!("{msg}; gave up after {max} restarts (save the file to retry)"),
            ),
            LspCrash::Hold => (
                Reason::Crashed,
                format!("{msg}; restartOnCrash is false (save the file to retry)"),
            ),
        };
        tracing::warn!(server = %key, %msg, restart, "language server crashed");
        self.set_status(key, |s| {
            mark_failed(s, reason, &message, tail, msg);
            s.started_at = None;
            s.capabilities = None;
        });
        if restart {
            (Requeue::After(Duration::ZERO), Some(Outcome::Failed))
        } else {
            lock(&self.held).insert(key.clone(), hash.to_owned());
            (Requeue::No, Some(Outcome::Failed))
        }
    }

    /// A ready instance: status `Ready`, and routing for calls and queries.
    fn publish_ready(
        &self,
        key: &Key,
        desired: &Desired<'_>,
        instance: &Instance,
        view: &ReadyView,
    ) {
        let (tools, prompts, capabilities) = match (&view.offer, desired) {
            (Offer::Mcp { handle, lists }, Desired::Mcp(d)) => {
                self.publish.mcp_ready(&key.name, handle, lists, &d.spec);
                let names: Vec<String> = lists.tools.iter().map(|t| t.name.to_string()).collect();
                (
                    Some(d.spec.exposed_tools(names.iter().map(String::as_str))),
                    Some(lists.prompts.iter().map(|p| p.name.clone()).collect()),
                    None,
                )
            }
            (Offer::Lsp { capabilities }, _) => (None, None, Some(capabilities.clone())),
            _ => (None, None, None),
        };
        let now_s = now_rfc3339();
        let started = rfc3339(view.started_wall);
        self.set_status(key, |s| {
            s.phase = Phase::Ready;
            s.reason = None;
            s.message = None;
            s.stderr_tail.clear();
            s.pid = view.pid;
            s.observed_generation = Some(instance.generation);
            s.observed_hash = Some(instance.hash.clone());
            s.tools = tools;
            s.prompts = prompts;
            s.capabilities = capabilities;
            s.next_retry_at = None;
            s.started_at = Some(started);
            sandboxed::fold(s, view.sandbox.as_ref(), &view.noted, &now_s);
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use steward_schema::desired::CliOptions;

    use super::*;
    use crate::observe::status::ControllerFacts;
    use crate::support::paths::Paths;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Issue 10 (10): per-key state does not outlive the key. Servers that
    /// failed to start (each holding a slot and a backoff) and are then
    /// removed leave the reconciler holding nothing, however many came and
    /// went.
    #[tokio::test]
    async fn removed_servers_leave_no_per_key_state() {
        const N: usize = 50;
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let env = BTreeMap::from([(
            "QWEN_HOME".to_owned(),
            dir.path().join("home").to_string_lossy().into_owned(),
        )]);
        let paths = Paths::resolve(&ws, &env).unwrap();
        let user = paths.user_settings.clone();
        let servers: serde_json::Map<String, serde_json::Value> = (0..N)
            .map(|i| {
                (
                    format!("s{i}"),
                    serde_json::json!({ "command": "/nonexistent/steward-no-such-server" }),
                )
            })
            .collect();
        write(
            &user,
            &serde_json::json!({ "mcpServers": servers }).to_string(),
        );
        let store = Arc::new(DesiredStore::cold_start(
            paths,
            env,
            CliOptions::default(),
            Vec::new(),
        ));
        let status = Arc::new(StatusStore::new(ControllerFacts::default()));
        let (events, mut event_rx) = mpsc::unbounded_channel();
        let (outcomes, _outcome_rx) = mpsc::unbounded_channel();
        let reconciler = Arc::new(Reconciler::new(
            store.clone(),
            status.clone(),
            Spawner::new().unwrap(),
            ReconcileConfig::default(),
            BTreeSet::new(),
            Arc::new(crate::engine::publish::Nowhere),
            None,
            Arc::default(),
            events,
            outcomes,
            CancellationToken::new(),
            Arc::new(SecretBook::new(dir.path().join("home"))),
        ));
        let keys: Vec<Key> = store.snapshot().keys().into_iter().collect();
        assert_eq!(keys.len(), N);
        for key in &keys {
            reconciler.clone().reconcile(key.clone()).await;
        }
        let failed = |status: &StatusStore| {
            keys.iter()
                .all(|k| status.get(k).is_some_and(|s| s.phase == Phase::Failed))
        };
        tokio::time::timeout(Duration::from_secs(20), async {
            while !failed(&status) {
                let event = event_rx.recv().await.expect("the instances report");
                reconciler.clone().reconcile(event.key).await;
            }
        })
        .await
        .expect("every server fails to start");
        assert!(
            reconciler.keys_with_state() >= N,
            "failed servers hold a backoff each: {}",
            reconciler.keys_with_state()
        );

        write(&user, "{}");
        store.apply_file(&user);
        for key in &keys {
            reconciler.clone().reconcile(key.clone()).await;
        }
        assert_eq!(
            reconciler.keys_with_state(),
            0,
            "state left for removed servers"
        );
        assert!(keys.iter().all(|k| status.get(k).is_none()));
    }
}

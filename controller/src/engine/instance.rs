//! Instances: one attempt to run one spec of one server, in its own task,
//! from spawn to reaped (kubelet: start the container, probe readiness
//! asynchronously).
//!
//! A reconcile *launches* an instance and returns; the instance's task
//! spawns the process (or opens the connection), runs the handshake and the
//! discovery, and publishes each step of its life as an [`InstancePhase`] on
//! a watch channel. Every change also sends a [`RuntimeEvent`] for its key,
//! so the queue looks at the key again and the reconcile acts on the new
//! phase (level-triggered: the event carries no decision).
//!
//! Stopping is asked, not awaited: [`Instance::stop`] returns at once and the
//! task does the protocol close, the drain of calls in flight (restarts for
//! a new configuration only), SIGTERM, the grace period and the reaping, then
//! publishes [`InstancePhase::Stopped`]. A stop asked during the handshake
//! drops it: the process group is killed at once.
//!
//! Invariants:
//! - the task owns the connection; nothing else can stop or replace it;
//! - a finished instance (`Failed`, `Exited`, `Stopped`) has released
//!   everything it started;
//! - phases only move forward: `Starting` → `Ready` → (`Exited` | `Stopped`),
//!   or `Starting` → (`Failed` | `Stopped`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use steward_schema::resource::{LspServerSpec, McpServerSpec, SandboxStatus};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument as _;

use crate::desired::snapshot::Key;
use crate::engine::publish::Publish;
use crate::observe::metrics::{kind_label, metrics};
use crate::observe::status::StatusStore;
use crate::observe::trace::TARGET;
use crate::runtime::lsp::{LspConnection, LspEvent};
use crate::runtime::mcp::{Broadcast, McpConnection, McpEvent, McpHandle, McpLists, McpTimeouts};
use crate::runtime::process::{SPAWNED_PID, Spawner};
use crate::runtime::start::StartError;
use crate::support::scrub::scrub;

/// Stderr lines kept with a crash.
const CRASH_TAIL_LINES: usize = 10;

/// What runs an instance needs from the controller.
pub struct InstanceContext {
    pub spawner: Spawner,
    pub workspace: PathBuf,
    pub mcp: McpTimeouts,
    /// Bound on the protocol close before the process is signalled.
    pub close_timeout: Duration,
    /// SIGTERM → SIGKILL grace.
    pub stop_grace: Duration,
    /// Where a language server's connection is published once ready.
    pub publish: Arc<dyn Publish>,
    pub broadcast: Option<Broadcast>,
    /// Where phase changes are announced (the controller enqueues the key).
    pub events: mpsc::UnboundedSender<RuntimeEvent>,
    /// Keeps each server's stderr across its processes (`steward logs`).
    pub status: Arc<StatusStore>,
}

/// "Look at this key again": an instance of it changed phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeEvent {
    pub key: Key,
}

/// The spec an instance runs.
#[derive(Debug, Clone)]
pub enum InstanceSpec {
    Mcp(Arc<McpServerSpec>),
    Lsp(Arc<LspServerSpec>),
}

/// What a ready instance offers.
#[derive(Debug, Clone)]
pub enum Offer {
    Mcp {
        handle: McpHandle,
        lists: Arc<McpLists>,
    },
    Lsp {
        capabilities: Value,
    },
}

/// A ready instance, as the reconcile sees it.
#[derive(Debug)]
pub struct ReadyView {
    pub pid: Option<u32>,
    /// Its process's sandbox (a local server), as status shows it.
    pub sandbox: Option<SandboxStatus>,
    /// The code-running files its process could create (absent when it
    /// started), and what was noted since of those that appeared.
    pub unpinned: Vec<std::path::PathBuf>,
    pub noted: std::sync::Mutex<Vec<String>>,
    pub started_at: Instant,
    pub started_wall: SystemTime,
    pub offer: Offer,
}

impl ReadyView {
    /// When a forwarded call last began or ended, and how many are in
    /// flight (an MCP server; read-only, for `--idle-stop`).
    pub fn activity(&self) -> Option<(Instant, usize)> {
        match &self.offer {
            Offer::Mcp { handle, .. } => {
                let relay = handle.relay();
                Some((relay.last_call(), relay.in_flight()))
            }
            Offer::Lsp { .. } => None,
        }
    }
}

/// Where an instance is in its life.
#[derive(Debug, Clone)]
pub enum InstancePhase {
    /// Spawned (pid known) or still spawning, handshake not done.
    Starting { pid: Option<u32> },
    /// Handshake and discovery done; republished when the lists change.
    Ready(Arc<ReadyView>),
    /// The start failed; everything it started is released.
    Failed(StartError),
    /// It died after being ready; cleaned up.
    Exited {
        message: String,
        tail: Vec<String>,
        started_at: Instant,
    },
    /// Stopped on request; cleaned up.
    Stopped,
}

impl InstancePhase {
    /// Whether the task has finished (nothing of it runs any more).
    pub fn is_finished(&self) -> bool {
        matches!(
            self,
            InstancePhase::Failed(_) | InstancePhase::Exited { .. } | InstancePhase::Stopped
        )
    }
}

/// How to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// Close, terminate, reap — now.
    Now,
    /// A restart for a new configuration: let forwarded calls in flight
    /// finish first (bounded), then stop.
    Drain(Duration),
}

/// The reconciler's handle on one instance.
#[derive(Debug)]
pub struct Instance {
    pub id: u64,
    /// The `configHash` it runs.
    pub hash: String,
    /// The `configHash` of the spec as the server got it (its secrets
    /// resolved): what says it runs outdated values. Never shown.
    pub effective: String,
    pub generation: u64,
    /// It replaces an earlier instance of a different spec (a restart).
    pub replaces: bool,
    /// The code generation it runs (a `dev` server: what was built when it
    /// was launched; see `engine::reconcile::dev`).
    pub code: u64,
    phase: watch::Receiver<InstancePhase>,
    /// The stop asked for (a watch, not a queue: only the last counts).
    stop: watch::Sender<Option<StopMode>>,
    stop_asked: bool,
    task: JoinHandle<()>,
}

impl Instance {
    /// Start running `spec` for `key` in a task of its own; returns at once.
    #[allow(clippy::too_many_arguments)]
    pub fn launch(
        context: &Arc<InstanceContext>,
        key: &Key,
        spec: InstanceSpec,
        effective: String,
        id: u64,
        generation: u64,
        replaces: bool,
    ) -> Instance {
        let hash = match &spec {
            InstanceSpec::Mcp(s) => s.config_hash.clone(),
            InstanceSpec::Lsp(s) => s.config_hash.clone(),
        };
        let (phase_tx, phase) = watch::channel(InstancePhase::Starting { pid: None });
        let (stop, stop_rx) = watch::channel(None);
        // A child of the reconcile that launched it.
        let start = tracing::trace_span!(
            target: TARGET,
            "server.start",
            kind = kind_label(key.kind),
            name = %key.name,
            id,
            pid = tracing::field::Empty,
            result = tracing::field::Empty,
        );
        let task = tokio::spawn(run(
            context.clone(),
            key.clone(),
            spec,
            phase_tx,
            stop_rx,
            start,
        ));
        Instance {
            id,
            hash,
            effective,
            generation,
            replaces,
            code: 0,
            phase,
            stop,
            stop_asked: false,
            task,
        }
    }

    /// The phase now.
    pub fn phase(&self) -> InstancePhase {
        self.phase.borrow().clone()
    }

    /// Ask the instance to stop (returns at once; `Stopped` follows). A
    /// later `Now` cuts short an earlier `Drain`.
    pub fn stop(&mut self, mode: StopMode) {
        if self.stop_asked && mode != StopMode::Now {
            return;
        }
        self.stop_asked = true;
        self.stop.send_replace(Some(mode));
    }

    /// Wait for the task to finish (shutdown).
    pub async fn join(self) {
        let _ = self.task.await;
    }
}

/// The live connection a task owns.
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

    fn sandbox(&self) -> Option<SandboxStatus> {
        match self {
            Conn::Mcp(c) => c.sandbox(),
            Conn::Lsp(c) => c.sandbox(),
        }
    }

    fn unpinned(&self) -> Vec<std::path::PathBuf> {
        match self {
            Conn::Mcp(c) => c.unpinned(),
            Conn::Lsp(c) => c.unpinned(),
        }
    }

    fn offer(&self) -> Offer {
        match self {
            Conn::Mcp(c) => Offer::Mcp {
                handle: c.handle(),
                lists: c.lists(),
            },
            Conn::Lsp(c) => Offer::Lsp {
                capabilities: c.capabilities(),
            },
        }
    }

    fn stderr_tail(&self) -> Vec<String> {
        match self {
            Conn::Mcp(c) => c.stderr_tail(CRASH_TAIL_LINES),
            Conn::Lsp(c) => c.stderr_tail(CRASH_TAIL_LINES),
        }
    }
}

/// What the connection reported: each report marks the watch changed;
/// one that sets `died` ends the instance, any other is a re-list.
#[derive(Default)]
struct Happened {
    died: Option<String>,
}

async fn run(
    context: Arc<InstanceContext>,
    key: Key,
    spec: InstanceSpec,
    phase: watch::Sender<InstancePhase>,
    mut stop: watch::Receiver<Option<StopMode>>,
    start: tracing::Span,
) {
    let notify = || {
        let _ = context.events.send(RuntimeEvent { key: key.clone() });
    };
    let set = |next: InstancePhase| {
        phase.send_replace(next);
        notify();
    };
    let (happened_tx, mut happened) = watch::channel::<Happened>(Happened::default());

    // Starting: spawn, handshake, discovery. The pid is published as soon as
    // the process exists; a stop now drops the attempt (killing the group).
    let launched = Instant::now();
    let (pid_tx, mut pid_rx) = watch::channel(None);
    let mut connect = Box::pin(
        SPAWNED_PID
            .scope(pid_tx, connect(&context, &key, &spec, happened_tx))
            .instrument(start.clone()),
    );
    let started = loop {
        tokio::select! {
            result = &mut connect => break result,
            Ok(()) = pid_rx.changed() => {
                let pid = *pid_rx.borrow_and_update();
                set(InstancePhase::Starting { pid });
            }
            _ = stop.changed() => {
                start.record("result", "cancelled");
                tracing::info!(server = %key, "start cancelled");
                // Dropping the attempt kills the process group at once;
                // its waiter reaps it.
                set(InstancePhase::Stopped);
                return;
            }
        }
    };
    // The start's span ends here, not with the instance.
    drop(connect);
    let conn = match started {
        Ok(conn) => {
            start.record("result", "ready");
            if let Some(pid) = conn.pid() {
                start.record("pid", pid);
            }
            drop(start);
            conn
        }
        Err(mut error) => {
            start.record("result", error.reason.as_str());
            drop(start);
            // A message may quote what the server was given (a command, a
            // URL): never a secret's value.
            error.message = scrub(&error.message).into_owned();
            set(InstancePhase::Failed(error));
            return;
        }
    };
    let started_at = Instant::now();
    let started_wall = SystemTime::now();
    let ready = |conn: &Conn| {
        InstancePhase::Ready(Arc::new(ReadyView {
            pid: conn.pid(),
            sandbox: conn.sandbox(),
            unpinned: conn.unpinned(),
            noted: Default::default(),
            started_at,
            started_wall,
            offer: conn.offer(),
        }))
    };
    tracing::info!(server = %key, pid = conn.pid(), "ready");
    metrics().started(key.kind, launched.elapsed());
    set(ready(&conn));

    // Ready: until asked to stop or the server dies.
    loop {
        tokio::select! {
            asked = stop.changed() => {
                let mode = match asked {
                    Ok(()) => stop.borrow_and_update().unwrap_or(StopMode::Now),
                    Err(_) => StopMode::Now,
                };
                // Boxed, as below: the steps of a stop live only while it
                // runs, not in every running instance's task.
                if let (StopMode::Drain(timeout), Conn::Mcp(c)) = (mode, &conn) {
                    Box::pin(drain(c.as_ref(), timeout, &key, &mut stop)).await;
                }
                Box::pin(shut(&context, &key, conn)).await;
                set(InstancePhase::Stopped);
                return;
            }
            Ok(()) = happened.changed() => {
                let died = happened.borrow_and_update().died.clone();
                match died {
                    // The connection has re-listed the server already.
                    None => set(ready(&conn)),
                    Some(message) => {
                        let message = scrub(&message).into_owned();
                        let tail = conn.stderr_tail();
                        Box::pin(shut(&context, &key, conn)).await;
                        set(InstancePhase::Exited { message, tail, started_at });
                        return;
                    }
                }
            }
        }
    }
}

/// Wait for forwarded calls in flight, bounded by `timeout`; a `Now` stop
/// cuts it short.
async fn drain(
    conn: &McpConnection,
    timeout: Duration,
    key: &Key,
    stop: &mut watch::Receiver<Option<StopMode>>,
) {
    let in_flight = conn.handle().relay().in_flight();
    if in_flight == 0 {
        return;
    }
    tracing::info!(server = %key, in_flight, "waiting for calls in flight before the restart");
    tokio::select! {
        drained = conn.drain(Instant::now() + timeout) => if !drained {
            tracing::warn!(server = %key, "calls still in flight after the entry's timeout; stopping anyway");
        },
        Ok(_) = stop.wait_for(|m| *m == Some(StopMode::Now)) => {}
    }
}

/// Stop the connection and reap everything.
async fn shut(context: &InstanceContext, key: &Key, conn: Conn) {
    match conn {
        Conn::Mcp(c) => c.stop(context.close_timeout, context.stop_grace).await,
        Conn::Lsp(c) => {
            context.publish.lsp_gone(&key.name, &c);
            c.stop(context.stop_grace).await;
        }
    }
}

/// Spawn (or connect), handshake, discover; for a language server also
/// replay its tracked documents before it counts as ready.
async fn connect(
    context: &InstanceContext,
    key: &Key,
    spec: &InstanceSpec,
    happened: watch::Sender<Happened>,
) -> Result<Conn, StartError> {
    // The server's stderr also goes to its log, which outlives the process.
    let spawner = context
        .spawner
        .with_stderr_sink(context.status.logs().sink(key))
        .with_egress_sink(crate::engine::sandboxed::egress_sink(
            context.status.clone(),
            key.clone(),
        ));
    match spec {
        InstanceSpec::Mcp(spec) => {
            let on_event = Arc::new(move |e: McpEvent| {
                let died = match e {
                    McpEvent::ListsChanged => None,
                    McpEvent::Exited(info) => Some(format!("the server exited ({info})")),
                    McpEvent::Unresponsive(msg) => {
                        Some(format!("the server stopped answering: {msg}"))
                    }
                };
                // The first death is the one told; a re-list after it is moot.
                happened.send_modify(|h| {
                    if h.died.is_none() {
                        h.died = died;
                    }
                });
            });
            let conn = McpConnection::connect(
                &spawner,
                &key.name,
                spec,
                &context.workspace,
                context.mcp,
                on_event,
            )
            .await?;
            if let Some(broadcast) = &context.broadcast {
                conn.set_broadcast(broadcast.clone());
            }
            Ok(Conn::Mcp(Box::new(conn)))
        }
        InstanceSpec::Lsp(spec) => {
            let on_event = Arc::new(move |e: LspEvent| {
                if let LspEvent::Exited(how) = e {
                    happened.send_modify(|h| {
                        h.died.get_or_insert_with(|| format!("the server {how}"));
                    });
                }
            });
            let conn = LspConnection::connect(&spawner, &key.name, spec, on_event).await?;
            let conn = Arc::new(conn);
            // Replay tracked documents before the start counts as done.
            context.publish.lsp_ready(&key.name, conn.clone()).await;
            Ok(Conn::Lsp(conn))
        }
    }
}

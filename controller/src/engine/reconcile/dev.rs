//! `dev`: a change of a server's own source is one more reason to replace
//! its instance.
//!
//! Level-triggered like the rest of reconcile. The source watcher
//! ([`crate::engine::watch::dev`]) counts settled changes per server — its
//! *code generation* — and the key's slot remembers which generation its
//! last build was for (`attempted`), which generation is built and ready
//! to run (`built`; without `dev.build`, every change is), and each
//! instance which generation it runs ([`Instance::code`]). Every reconcile
//! compares them, so a requeue or a lost event never loses a change:
//! - a generation not attempted yet, no build running → run `dev.build`
//!   (a task of its own, through the runtime's spawner, output into the
//!   server's log) or, without one, count it built;
//! - a build that ended → built (success), or the running server is kept:
//!   condition `BuildFailed` with the build's last lines, a Warning event;
//!   the next change builds again;
//! - an instance running an older generation than the built one, no build
//!   running → replaced as a configuration edit replaces it (calls in
//!   flight drain, new calls wait, `list_changed` only if the catalog
//!   differs); a server that is not running is retried at once instead.
//!
//! A build runs under the `standard` permission profile (it must write its
//! outputs into the workspace), or none when the server's profile is `off`.
//! It runs while its server keeps serving; one that is cancelled
//! (the server removed, blocked, or the controller stopping) is stopped
//! and reaped before its task ends.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use steward_schema::resource::{
    BuildResult, ConditionStatus, DevSpec, DevStatus, LastBuild, ResourceKind, ServerStatus,
    sandbox_in_force,
};
use steward_schema::sandbox::{Resolved, Sandbox};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Decision, Reconciler, Slot};
use crate::desired::snapshot::{Desired, Key};
use crate::engine::instance::{InstancePhase, InstanceSpec, RuntimeEvent, StopMode};
use crate::engine::queue::Requeue;
use crate::observe::clock::now_rfc3339;
use crate::observe::events::{EventType, NewEvent, ObjectRef};
use crate::observe::metrics::metrics;
use crate::observe::status::set_condition;
use crate::runtime::build::{self, BuildEnd, BuildReport, BuildSpec};
use crate::runtime::sandbox::SandboxRequest;
use crate::support::sync::lock;

/// The condition a failed build sets.
pub const BUILD_FAILED: &str = "BuildFailed";
/// Build output lines the condition and `status.dev.lastBuild` keep.
const TAIL_SHOWN: usize = 10;
/// Bound on a language server's build (its entry has no `timeout`).
const LSP_BUILD_TIMEOUT: Duration = Duration::from_secs(600);

/// What reconcile remembers of a `dev` server's code.
#[derive(Debug, Default)]
pub(super) struct DevSlot {
    /// The generation the last build (or change without a build) was for.
    attempted: u64,
    /// The generation ready to run: new instances run it.
    pub(super) built: u64,
    /// The generation a server that was not running was last retried for.
    retried: u64,
    build: Option<Build>,
}

impl DevSlot {
    /// Nothing to remember: the slot may go.
    pub(super) fn is_empty(&self) -> bool {
        self.attempted == 0 && self.built == 0 && self.build.is_none()
    }

    /// Stops a running build (its task stops and reaps it); its change is
    /// built again by the next reconcile that may. Returns its task, for a
    /// caller that waits.
    pub(super) fn cancel(&mut self) -> Option<JoinHandle<()>> {
        let build = self.build.take()?;
        build.cancel.cancel();
        self.attempted = self.built;
        Some(build.task)
    }
}

/// A build running for one generation.
#[derive(Debug)]
struct Build {
    generation: u64,
    cancel: CancellationToken,
    /// Set by the task when the build has ended.
    report: Arc<Mutex<Option<BuildReport>>>,
    task: JoinHandle<()>,
}

fn dev_of<'a>(desired: &'a Desired<'_>) -> Option<&'a DevSpec> {
    match desired {
        Desired::Mcp(d) => d.spec.dev.as_ref(),
        Desired::Lsp(d) => d.spec.dev.as_ref(),
    }
}

impl Reconciler {
    /// The `dev` step of a reconcile (see the module docs), after the
    /// configuration's own replacement and before the instance's phase is
    /// followed; `runnable` is the spec the server gets (its secrets
    /// resolved), whose environment the build gets too. `Some`: the
    /// reconcile ends here (a server that is not running waits for the
    /// build of its new code).
    pub(super) fn dev_step(
        &self,
        key: &Key,
        desired: &Desired<'_>,
        runnable: &InstanceSpec,
        slot: &mut Slot,
        drain: StopMode,
    ) -> Option<Decision> {
        let Some(dev) = dev_of(desired) else {
            slot.dev.cancel();
            if self.status.get(key).is_some_and(|s| s.dev.is_some()) {
                self.set_status(key, |s| {
                    s.dev = None;
                    s.conditions.retain(|c| c.type_ != BUILD_FAILED);
                });
            }
            return None;
        };
        let code = self.dev_sources.get(key).unwrap_or_default();
        let ended = slot
            .dev
            .build
            .as_ref()
            .and_then(|b| lock(&b.report).take().map(|r| (b.generation, r)));
        if let Some((generation, report)) = ended {
            slot.dev.build = None;
            self.build_ended(key, dev, slot, generation, &report);
        }
        if slot.dev.build.is_none() && code.generation != slot.dev.attempted {
            slot.dev.attempted = code.generation;
            match &dev.build {
                Some(command) => {
                    let build = self.start_build(key, runnable, dev, command, code.generation);
                    slot.dev.build = Some(build);
                }
                None => slot.dev.built = code.generation,
            }
        }
        let building = slot.dev.build.is_some();
        self.set_status(key, |s| {
            let d = s.dev.get_or_insert_with(DevStatus::default);
            d.watching = code.watching;
            d.message = code.message.clone();
            d.files = code.files;
            d.building = building;
        });
        let built = slot.dev.built;
        // What runs, if anything: whether it runs older code.
        let outdated = slot.current.as_ref().map(|current| {
            current.code != built
                && matches!(
                    current.phase(),
                    InstancePhase::Ready(_) | InstancePhase::Starting { .. }
                )
        });
        match outdated {
            // A build for newer code runs: the server is replaced once, after it.
            Some(_) if building => None,
            Some(true) => {
                self.reload(key, &code.changed, code.changed_count, slot, drain);
                None
            }
            Some(false) => None,
            // Not running: its new code starts once built, without backoff.
            None if building => Some((Requeue::No, None)),
            None if slot.dev.retried != built => {
                slot.dev.retried = built;
                self.retry_now(key);
                None
            }
            None => None,
        }
    }

    /// Replaces the running instance with one of the built code.
    fn reload(
        &self,
        key: &Key,
        changed: &[String],
        count: usize,
        slot: &mut Slot,
        drain: StopMode,
    ) {
        let pid = self.status.get(key).and_then(|s| s.pid);
        let mut what = changed.join(", ");
        if count > changed.len() {
            what.push_str(&format!(" and {} more", count - changed.len()));
        }
        let what = if what.is_empty() {
            "its source changed".to_owned()
        } else {
            format!("{what} changed")
        };
        let message = match pid {
            Some(pid) => format!("{what}: replacing pid {pid}"),
            None => format!("{what}: restarting"),
        };
        tracing::info!(server = %key, "{message}");
        self.status.events().record(
            ObjectRef::server(key),
            NewEvent::new(EventType::Normal, "SourceChanged", message),
            &now_rfc3339(),
        );
        metrics().dev_reload(&key.name, "reloaded");
        self.set_status(key, |s| {
            if let Some(d) = s.dev.as_mut() {
                d.reloads += 1;
            }
        });
        self.replace(key, slot, drain);
        self.retry_now(key);
        slot.dev.retried = slot.dev.built;
    }

    /// Starts `dev.build` for `generation` in a task of its own; its end
    /// enqueues the key.
    fn start_build(
        &self,
        key: &Key,
        runnable: &InstanceSpec,
        dev: &DevSpec,
        command: &str,
        generation: u64,
    ) -> Build {
        let (env, timeout, resolved) = match runnable {
            InstanceSpec::Mcp(spec) => (
                spec.env.clone().unwrap_or_default(),
                spec.call_timeout(),
                &spec.resolved_sandbox,
            ),
            InstanceSpec::Lsp(spec) => {
                (spec.env.clone(), LSP_BUILD_TIMEOUT, &spec.resolved_sandbox)
            }
        };
        let spec = BuildSpec {
            command: command.to_owned(),
            cwd: dev.cwd.clone().into(),
            env,
            timeout,
            sandbox: build_sandbox(resolved, key),
        };
        tracing::info!(server = %key, command, cwd = %dev.cwd, "building");
        let cancel = CancellationToken::new();
        let report = Arc::new(Mutex::new(None));
        let log = self.status.logs().build_sink(key, command);
        let task = {
            let (spawner, events) = (self.context.spawner.clone(), self.context.events.clone());
            let (cancel, report, key) = (cancel.clone(), report.clone(), key.clone());
            tokio::spawn(async move {
                if let Some(done) = build::run(&spawner, &spec, log, &cancel).await {
                    *lock(&report) = Some(done);
                    let _ = events.send(RuntimeEvent { key });
                }
            })
        };
        Build {
            generation,
            cancel,
            report,
            task,
        }
    }

    /// Records how the build of `generation` ended: its code is built, or
    /// the running server is kept and `BuildFailed` says why.
    fn build_ended(
        &self,
        key: &Key,
        dev: &DevSpec,
        slot: &mut Slot,
        generation: u64,
        report: &BuildReport,
    ) {
        let command = dev.build.as_deref().unwrap_or_default();
        let took =
            humantime::format_duration(Duration::from_millis(report.duration.as_millis() as u64));
        let tail: Vec<String> = report
            .tail
            .iter()
            .skip(report.tail.len().saturating_sub(TAIL_SHOWN))
            .cloned()
            .collect();
        let result = match (report.succeeded(), &report.end) {
            (true, _) => BuildResult::Succeeded,
            (false, BuildEnd::TimedOut) => BuildResult::TimedOut,
            (false, _) => BuildResult::Failed,
        };
        let last = LastBuild {
            result,
            duration_ms: report.duration.as_millis() as u64,
            at: now_rfc3339(),
            tail: tail.clone(),
        };
        let pid = report.pid.unwrap_or(0);
        let logs = self.status.logs();
        if report.succeeded() {
            slot.dev.built = generation;
            tracing::info!(server = %key, took = %took, "build succeeded");
            logs.note(key, pid, &format!("--- build succeeded in {took}"));
            let now = now_rfc3339();
            self.set_status(key, |s| {
                set_dev_build(s, last);
                if s.conditions.iter().any(|c| c.type_ == BUILD_FAILED) {
                    set_condition(
                        &mut s.conditions,
                        BUILD_FAILED,
                        ConditionStatus::False,
                        Some("BuildSucceeded"),
                        None,
                        &now,
                    );
                }
            });
            return;
        }
        let kept = match &slot.current {
            Some(_) => "the running server is kept",
            None => "nothing was started",
        };
        let how = report.describe();
        let headline = format!("build `{command}` {how} after {took}; {kept}");
        tracing::warn!(server = %key, "{headline}");
        logs.note(key, pid, &format!("--- build {how} after {took}; {kept}"));
        let mut message = headline.clone();
        for line in &tail {
            message.push('\n');
            message.push_str(line);
        }
        let label = if result == BuildResult::TimedOut {
            "build_timeout"
        } else {
            "build_failed"
        };
        metrics().dev_reload(&key.name, label);
        let event = match tail.last() {
            Some(line) => format!("{headline}: {line}"),
            None => headline,
        };
        self.status.events().record(
            ObjectRef::server(key),
            NewEvent::new(EventType::Warning, BUILD_FAILED, event),
            &now_rfc3339(),
        );
        let now = now_rfc3339();
        self.set_status(key, |s| {
            set_dev_build(s, last);
            set_condition(
                &mut s.conditions,
                BUILD_FAILED,
                ConditionStatus::True,
                Some(BUILD_FAILED),
                Some(&message),
                &now,
            );
        });
    }
}

/// The profile a build runs under: `standard` — a build writes its outputs
/// into the workspace and may fetch packages, and reads no credential
/// store — whatever narrower profile the server has; nothing when the
/// server runs with `off`.
fn build_sandbox(resolved: &Option<Resolved>, key: &Key) -> Option<SandboxRequest> {
    use crate::runtime::sandbox::home;
    let owner = match key.kind {
        ResourceKind::McpServer => home::mcp_owner(&key.name),
        ResourceKind::LspServer => home::lsp_owner(&key.name),
    };
    match sandbox_in_force(resolved) {
        Resolved::Profile { sandbox, .. } if sandbox.is_off() => None,
        Resolved::Profile {
            sandbox, require, ..
        } => Some(SandboxRequest {
            note: (!sandbox.is_standard())
                .then(|| "a build runs under the standard profile".to_owned()),
            profile: Sandbox::standard(),
            require,
            owner,
        }),
        Resolved::Unknown(_) => Some(SandboxRequest {
            profile: Sandbox::standard(),
            require: false,
            note: None,
            owner,
        }),
    }
}

fn set_dev_build(s: &mut ServerStatus, last: LastBuild) {
    let d = s.dev.get_or_insert_with(DevStatus::default);
    d.building = false;
    d.last_build = Some(last);
}

//! Lazy start and idle stop (`--start lazy`, `--idle-stop`): when an MCP
//! server that is not running may stay `Idle` (its cached catalog listed
//! instead), when a Ready one is stopped for being unused, and the status
//! of an idle server.

use std::sync::Arc;
use std::time::Duration;

use steward_schema::resource::{ConditionStatus, McpServerSpec, Phase, Reason};
use tokio::time::Instant;

use super::{Reconciler, Slot, StartMode};
use crate::desired::snapshot::Key;
use crate::engine::instance::{ReadyView, StopMode};
use crate::engine::publish::IdleCatalog;
use crate::engine::queue::Requeue;
use crate::observe::clock::now_rfc3339;
use crate::observe::status::set_condition;
use crate::support::sync::lock;

impl Reconciler {
    /// Why MCP server `key`, not running, may stay idle (if its catalog is
    /// cached): no call demanded it since it was stopped for being idle, or
    /// since the controller started with `--start lazy`.
    pub(super) fn stays_idle(&self, key: &Key, slot: &Slot) -> Option<Reason> {
        if lock(&self.wanted).contains(key) {
            return None;
        }
        if slot.idle_stopped {
            Some(Reason::IdleStopped)
        } else if self.start == StartMode::Lazy {
            Some(Reason::NotStarted)
        } else {
            None
        }
    }

    /// `--idle-stop`: a Ready MCP server no call has used for `idle` (and
    /// none in flight) is stopped, its cached catalog listed in place of the
    /// live one; otherwise look again at its idle deadline.
    pub(super) fn idle_check(
        &self,
        key: &Key,
        spec: &Arc<McpServerSpec>,
        slot: &mut Slot,
        view: &ReadyView,
        idle: Duration,
    ) -> Requeue {
        let Some((last_call, in_flight)) = view.activity() else {
            return Requeue::No;
        };
        let now = Instant::now();
        if in_flight > 0 {
            return Requeue::At(now + idle);
        }
        let due = last_call.max(view.started_at) + idle;
        if now < due {
            return Requeue::At(due);
        }
        // Listed from the cache first, so new calls wait for (and demand)
        // the next start instead of reaching the stopping connection.
        if self.publish.mcp_idle(&key.name, spec).is_none() {
            // Nothing cached to list in its place: it keeps running.
            return Requeue::At(now + idle);
        }
        let Some(mut instance) = slot.current.take() else {
            return Requeue::No;
        };
        tracing::info!(server = %key, idle = %humantime::format_duration(idle), "stopping an idle server");
        self.set_status(key, |s| s.phase = Phase::Stopping);
        // A call that took the connection just before still finishes.
        instance.stop(StopMode::Drain(spec.call_timeout()));
        slot.retiring.push(instance);
        slot.published = None;
        slot.idle_stopped = true;
        lock(&self.wanted).remove(key);
        Requeue::No
    }

    /// Status `Idle` for `reason`, with the cached catalog's tools.
    pub(super) fn set_idle(
        &self,
        key: &Key,
        reason: Reason,
        spec: &McpServerSpec,
        catalog: &IdleCatalog,
    ) {
        let cached = if catalog.earlier {
            "the catalog cached under its configuration before the last edit"
        } else {
            "its cached catalog"
        };
        let message = match (reason, self.idle_stop) {
            (Reason::IdleStopped, Some(idle)) => format!(
                "stopped after {} without a call; {cached} is listed and the next call starts it",
                humantime::format_duration(idle)
            ),
            _ => format!(
                "not started (--start lazy); {cached} is listed and the first call starts it"
            ),
        };
        let tools = spec.exposed_tools(catalog.tools.iter().map(String::as_str));
        let now_s = now_rfc3339();
        self.set_status(key, |s| {
            s.phase = Phase::Idle;
            s.reason = Some(reason);
            s.message = Some(message.clone());
            s.stderr_tail.clear();
            s.pid = None;
            s.next_retry_at = None;
            s.started_at = None;
            s.tools = Some(tools);
            s.prompts = Some(catalog.prompts.clone());
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
                ConditionStatus::False,
                Some(reason.as_str()),
                Some(&message),
                &now_s,
            );
        });
    }
}

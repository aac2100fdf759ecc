//! Reload bookkeeping: which keys a reload enqueued and how each settled,
//! folded into `status.controller.lastReload` once all have finished.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use steward_schema::resource::{Reason, ReloadSummary, Skipped};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::desired::snapshot::{Key, Snapshot};
use crate::engine::reconcile::{Outcome, Settled};
use crate::observe::clock::now_rfc3339;
use crate::observe::metrics::metrics;
use crate::observe::trace::TARGET;

/// A reload's trigger as a metric label: `start`, `file`, `resync`,
/// `manual` (`steward reload`), `restart` (`steward restart`).
fn trigger_label(trigger: &str) -> &'static str {
    match trigger {
        "start" => "start",
        "resync" => "resync",
        "steward reload" => "manual",
        "steward restart" => "restart",
        _ => "file",
    }
}

/// A change `trigger` brought was rejected (an invalid source): nothing
/// was applied.
pub(super) fn rejected(trigger: &str) {
    metrics().reloaded(trigger_label(trigger), "rejected", None);
}

/// Tracks what the current reload did, key by key, until all its keys were
/// settled; then it becomes `status.controller.lastReload`. A key counts
/// only with an outcome decided on a snapshot at least as new as the change
/// that made it pending, so a reconcile that read an older snapshot never
/// completes a newer reload (and `steward reload` never answers early).
#[derive(Debug, Default)]
pub(super) struct ReloadTracker {
    current: Option<(ReloadSummary, BTreeMap<Key, u64>)>,
    /// When the current reload began, and its first trigger (for metrics).
    began: Option<(Instant, &'static str)>,
    /// The current reload's span (exported as a trace).
    span: Option<tracing::Span>,
    waiters: Vec<oneshot::Sender<ReloadSummary>>,
}

impl ReloadTracker {
    /// Answered with the summary when the current (or next) reload ends.
    pub(super) fn waiter(&mut self) -> oneshot::Receiver<ReloadSummary> {
        let (tx, rx) = oneshot::channel();
        self.waiters.push(tx);
        rx
    }

    /// With no reload in progress no outcome will ever come to answer the
    /// waiters: drop them (they answer "nothing to reconcile") instead of
    /// leaving `steward reload` hanging.
    pub(super) fn release_waiters_if_idle(&mut self) {
        if self.current.is_none() {
            self.waiters.clear();
        }
    }

    pub(super) fn begin<'k>(
        &mut self,
        trigger: &str,
        changed: &[Key],
        epoch: u64,
        all: impl Iterator<Item = &'k Key>,
    ) {
        if self.current.is_none() {
            self.began = Some((Instant::now(), trigger_label(trigger)));
            self.span = Some(tracing::trace_span!(
                target: TARGET,
                "reload",
                trigger = trigger_label(trigger),
                keys = changed.len(),
                added = tracing::field::Empty,
                restarted = tracing::field::Empty,
                removed = tracing::field::Empty,
                failed = tracing::field::Empty,
            ));
        }
        let (summary, pending) = self.current.get_or_insert_with(|| {
            (
                ReloadSummary {
                    at: now_rfc3339(),
                    trigger: String::new(),
                    ..ReloadSummary::default()
                },
                BTreeMap::new(),
            )
        });
        if !summary.trigger.is_empty() && !summary.trigger.contains(trigger) {
            summary.trigger.push_str(", ");
        }
        if !summary.trigger.contains(trigger) {
            summary.trigger.push_str(trigger);
        }
        for key in changed {
            pending.insert(key.clone(), epoch);
        }
        summary.unchanged = all
            .filter(|k| !pending.contains_key(*k))
            .map(|k| k.name.clone())
            .collect();
    }

    /// Record an outcome; returns the summary when the reload is complete.
    pub(super) fn outcome(&mut self, settled: &Settled) -> Option<ReloadSummary> {
        let (summary, pending) = self.current.as_mut()?;
        let key = &settled.key;
        if pending.get(key).is_none_or(|since| settled.epoch < *since) {
            return None;
        }
        pending.remove(key);
        let name = key.name.clone();
        match &settled.outcome {
            Outcome::Added => summary.added.push(name),
            Outcome::Restarted => summary.restarted.push(name),
            Outcome::Removed => summary.removed.push(name),
            Outcome::Failed => summary.failed.push(name),
            // Idle is settled: admitted, listed, started by the next call.
            Outcome::Unchanged | Outcome::Idle => summary.unchanged.push(name),
            Outcome::Skipped(reason) => summary.skipped.push(Skipped {
                kind: key.kind,
                name,
                reason: *reason,
            }),
        }
        self.finish_if_done()
    }

    pub(super) fn finish_if_done(&mut self) -> Option<ReloadSummary> {
        if self.current.as_ref().is_some_and(|(_, p)| p.is_empty()) {
            let (mut summary, _) = self.current.take()?;
            // A name settled otherwise is not also unchanged.
            let settled: BTreeSet<&String> = summary
                .added
                .iter()
                .chain(&summary.restarted)
                .chain(&summary.removed)
                .chain(&summary.failed)
                .chain(summary.skipped.iter().map(|s| &s.name))
                .collect();
            let unchanged: Vec<String> = summary
                .unchanged
                .iter()
                .filter(|n| !settled.contains(n))
                .cloned()
                .collect();
            summary.unchanged = unchanged;
            summary.unchanged.sort();
            summary.unchanged.dedup();
            if let Some((began, trigger)) = self.began.take() {
                let result = if summary.failed.is_empty() {
                    "success"
                } else {
                    "failed"
                };
                metrics().reloaded(trigger, result, Some(began.elapsed()));
            }
            if let Some(span) = self.span.take() {
                span.record("added", summary.added.len());
                span.record("restarted", summary.restarted.len());
                span.record("removed", summary.removed.len());
                span.record("failed", summary.failed.len());
            }
            for w in self.waiters.drain(..) {
                let _ = w.send(summary.clone());
            }
            return Some(summary);
        }
        None
    }
}

pub(super) fn log_reload(s: &ReloadSummary) {
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

/// What the user must do for the servers that wait on them, one line per
/// reason (pending approval, rejected, untrusted workspace, not allowed):
/// the servers and the command or the file that lets them run. Said at start
/// and after each reload, so a blocked server never goes unmentioned.
pub(super) fn user_actions(snap: &Snapshot, trusted_folders: &Path) -> Vec<String> {
    let mut waiting: BTreeMap<u8, Vec<&str>> = BTreeMap::new();
    for key in snap.key_iter() {
        let rank = match snap.blocked(key).map(|b| b.reason) {
            Some(Reason::PendingApproval) => 0,
            Some(Reason::Rejected) => 1,
            Some(Reason::UntrustedWorkspace) => 2,
            Some(Reason::NotAllowed) => 3,
            _ => continue,
        };
        waiting.entry(rank).or_default().push(&key.name);
    }
    waiting
        .into_iter()
        .map(|(rank, names)| {
            let n = names.len();
            let one = n == 1;
            let servers = if one { "1 server".to_owned() } else { format!("{n} servers") };
            let pick = |single: &'static str, plural: &'static str| if one { single } else { plural };
            let list = names.join(", ");
            let args = names.join(" ");
            match rank {
                0 => format!(
                    "{servers} {} for approval: {list} — run: steward approve {args}",
                    pick("waits", "wait")
                ),
                1 => format!(
                    "{servers} {} rejected: {list} — to run {} anyway: steward approve {args} (or edit {} to be asked again)",
                    pick("was", "were"),
                    pick("it", "them"),
                    pick("its entry", "their entries")
                ),
                2 => format!(
                    "{servers} {} not run because the workspace is not trusted: {list} — trust it in {}",
                    pick("does", "do"),
                    trusted_folders.display()
                ),
                _ => format!(
                    "{servers} {} not in the allow-list (mcp.allowed / lsp.allowed, or the --allowed-* options): {list} — add {} to run {}",
                    pick("is", "are"),
                    pick("it", "them"),
                    pick("it", "them")
                ),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settled(key: &Key, outcome: Outcome, epoch: u64) -> Settled {
        Settled {
            key: key.clone(),
            outcome,
            epoch,
        }
    }

    /// Issue 10, "Status that lies": an outcome decided on a snapshot older
    /// than the change that made its key pending does not complete the
    /// reload (so `lastReload` does not credit it, and `steward reload`
    /// does not answer before the new spec is applied).
    #[test]
    fn an_outcome_of_an_older_snapshot_does_not_complete_a_newer_reload() {
        let (a, b) = (Key::mcp("a"), Key::mcp("b"));
        let all = [a.clone(), b.clone()];
        let mut tracker = ReloadTracker::default();
        tracker.begin("edit", std::slice::from_ref(&a), 7, all.iter());
        assert_eq!(
            tracker.outcome(&settled(&a, Outcome::Restarted, 6)),
            None,
            "an outcome of epoch 6 completed the reload of epoch 7"
        );
        let summary = tracker
            .outcome(&settled(&a, Outcome::Restarted, 7))
            .expect("the outcome of the reload's own snapshot completes it");
        assert_eq!(summary.restarted, ["a"]);
        assert_eq!(summary.unchanged, ["b"]);
    }
}

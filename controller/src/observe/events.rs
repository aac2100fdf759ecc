//! The event log: Kubernetes-style events (`steward events`, the Events of
//! `steward describe`) in a bounded ring.
//!
//! Server events are not recorded by the code that acts: they are derived
//! from status transitions ([`transition`]), which the status store reports
//! on every change of a server's phase or reason — so a resync that confirms
//! what runs records nothing, and every way a server can change state is
//! covered by one rule. The controller records its own events (reloads,
//! rejected sources, restarts asked for) with [`EventLog::record`].
//!
//! An event repeated for the same object with the same type, reason and
//! message is not stored twice: its `count` and `lastTimestamp` move, and it
//! becomes the newest (as the Kubernetes event correlator does). Every new or
//! updated event gets the next `resourceVersion`, which a watch (`events -w`)
//! resumes after.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use steward_schema::resource::{Phase, Reason, ReloadSummary, ServerStatus};
use tokio::sync::watch;

use crate::desired::snapshot::Key;

/// Events kept (the oldest go first).
pub const EVENT_CAPACITY: usize = 1000;

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// What an event is about: a server (`McpServer`, `LspServer`) or the
/// controller of the workspace (`Workspace`, named after its directory).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    pub kind: String,
    pub name: String,
}

impl ObjectRef {
    pub fn server(key: &Key) -> Self {
        ObjectRef {
            kind: key.kind.to_string(),
            name: key.name.clone(),
        }
    }

    pub fn workspace(name: &str) -> Self {
        ObjectRef {
            kind: "Workspace".to_owned(),
            name: name.to_owned(),
        }
    }

    /// `mcpserver/github`, as kubectl names objects.
    pub fn display(&self) -> String {
        format!("{}/{}", self.kind.to_ascii_lowercase(), self.name)
    }
}

/// One event (the fields of a Kubernetes `core/v1` Event that matter here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    #[serde(rename = "type")]
    pub type_: EventType,
    /// CamelCase: `Started`, `Crashed`, `PendingApproval`, `Reloaded`…
    pub reason: String,
    pub involved_object: ObjectRef,
    pub message: String,
    /// How many times it happened (see the module docs).
    pub count: u32,
    /// RFC 3339.
    pub first_timestamp: String,
    /// RFC 3339.
    pub last_timestamp: String,
    /// Increases with every new or updated event.
    pub resource_version: u64,
}

/// An event to record: type, reason, message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    pub type_: EventType,
    pub reason: String,
    pub message: String,
}

impl NewEvent {
    pub fn new(type_: EventType, reason: &str, message: impl Into<String>) -> Self {
        NewEvent {
            type_,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// Oldest (least recently seen) first.
    events: VecDeque<Event>,
    last_version: u64,
}

/// The bounded event ring, shared by the status store (writer) and the
/// control socket (readers).
#[derive(Debug)]
pub struct EventLog {
    inner: Mutex<Inner>,
    capacity: usize,
    version: watch::Sender<u64>,
}

impl Default for EventLog {
    fn default() -> Self {
        Self::new(EVENT_CAPACITY)
    }
}

impl EventLog {
    pub fn new(capacity: usize) -> Self {
        EventLog {
            inner: Mutex::new(Inner::default()),
            capacity: capacity.max(1),
            version: watch::Sender::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Record `event` about `object` at `now` (RFC 3339).
    pub fn record(&self, object: ObjectRef, event: NewEvent, now: &str) {
        let version = {
            let mut inner = self.lock();
            inner.last_version += 1;
            let version = inner.last_version;
            let same = inner.events.iter().position(|e| {
                e.involved_object == object
                    && e.type_ == event.type_
                    && e.reason == event.reason
                    && e.message == event.message
            });
            let stored = match same.and_then(|i| inner.events.remove(i)) {
                Some(mut e) => {
                    e.count += 1;
                    e.last_timestamp = now.to_owned();
                    e.resource_version = version;
                    e
                }
                None => Event {
                    type_: event.type_,
                    reason: event.reason,
                    involved_object: object,
                    message: event.message,
                    count: 1,
                    first_timestamp: now.to_owned(),
                    last_timestamp: now.to_owned(),
                    resource_version: version,
                },
            };
            inner.events.push_back(stored);
            while inner.events.len() > self.capacity {
                inner.events.pop_front();
            }
            version
        };
        self.version.send_replace(version);
    }

    /// Every event kept, oldest first.
    pub fn list(&self) -> Vec<Event> {
        self.lock().events.iter().cloned().collect()
    }

    /// The events new or updated after `version`, oldest first.
    pub fn since(&self, version: u64) -> Vec<Event> {
        self.lock()
            .events
            .iter()
            .filter(|e| e.resource_version > version)
            .cloned()
            .collect()
    }

    /// A receiver that sees the latest `resourceVersion` after every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }
}

/// The event a server's status change stands for, if any: `before` is
/// `None` for a server seen for the first time.
pub fn transition(before: Option<&ServerStatus>, after: &ServerStatus) -> Option<NewEvent> {
    let same_state = before.is_some_and(|b| b.phase == after.phase && b.reason == after.reason);
    if same_state {
        return match before {
            Some(b) if after.phase == Phase::Ready && b.tools != after.tools => {
                Some(NewEvent::new(
                    EventType::Normal,
                    "ToolsChanged",
                    format!("{} tools", after.tools.as_ref().map_or(0, Vec::len)),
                ))
            }
            _ => None,
        };
    }
    let message = || first_line(after.message.as_deref()).unwrap_or_default();
    Some(match after.phase {
        Phase::Pending => return None,
        Phase::Starting => match before {
            Some(b) if b.phase == Phase::Blocked => NewEvent::new(
                EventType::Normal,
                "Admitted",
                format!(
                    "admitted (was {}); starting",
                    b.reason.map_or("blocked", Reason::as_str)
                ),
            ),
            _ => NewEvent::new(EventType::Normal, "Starting", "starting the server"),
        },
        Phase::Ready => {
            let mut parts = Vec::new();
            if let Some(pid) = after.pid {
                parts.push(format!("pid {pid}"));
            }
            if let Some(tools) = &after.tools {
                parts.push(format!("{} tools", tools.len()));
            }
            let message = if parts.is_empty() {
                "ready".to_owned()
            } else {
                format!("ready ({})", parts.join(", "))
            };
            NewEvent::new(EventType::Normal, "Started", message)
        }
        Phase::Idle => NewEvent::new(
            EventType::Normal,
            "Idle",
            format!(
                "{}: {}",
                after.reason.map_or("Idle", Reason::as_str),
                message()
            ),
        ),
        Phase::Stopping => NewEvent::new(
            EventType::Normal,
            "Stopping",
            match before.and_then(|b| b.pid) {
                Some(pid) => format!("stopping pid {pid}"),
                None => "stopping".to_owned(),
            },
        ),
        Phase::Failed => {
            let reason = after.reason.map_or("Failed", Reason::as_str);
            // The Ready condition says what happened without the retry
            // delay, so repeats of one failure count up as one event.
            let what = after
                .conditions
                .iter()
                .find(|c| c.type_ == "Ready")
                .and_then(|c| first_line(c.message.as_deref()))
                .unwrap_or_else(message);
            NewEvent::new(EventType::Warning, reason, what)
        }
        Phase::Blocked => {
            // What the user chose is Normal; what waits on the user is a Warning.
            let type_ = match after.reason {
                Some(
                    Reason::Disabled
                    | Reason::NotAllowed
                    | Reason::Excluded
                    | Reason::StoppedByUser,
                ) => EventType::Normal,
                _ => EventType::Warning,
            };
            let reason = after.reason.map_or("Blocked", Reason::as_str);
            NewEvent::new(type_, reason, message())
        }
    })
}

/// The event of a finished reload: what it did, a Warning when a server failed.
pub fn reloaded(summary: &ReloadSummary) -> NewEvent {
    let mut parts = Vec::new();
    for (what, names) in [
        ("added", &summary.added),
        ("restarted", &summary.restarted),
        ("removed", &summary.removed),
        ("failed", &summary.failed),
    ] {
        if !names.is_empty() {
            parts.push(format!("{what} {}", names.join(", ")));
        }
    }
    if !summary.skipped.is_empty() {
        let skipped: Vec<String> = summary
            .skipped
            .iter()
            .map(|s| format!("{} ({})", s.name, s.reason))
            .collect();
        parts.push(format!("blocked {}", skipped.join(", ")));
    }
    if parts.is_empty() {
        parts.push("nothing to change".to_owned());
    }
    let type_ = if summary.failed.is_empty() {
        EventType::Normal
    } else {
        EventType::Warning
    };
    NewEvent::new(
        type_,
        "Reloaded",
        format!("{}: {}", summary.trigger, parts.join("; ")),
    )
}

/// The event of a server leaving the configuration.
pub fn removed() -> NewEvent {
    NewEvent::new(
        EventType::Normal,
        "Removed",
        "removed from the configuration",
    )
}

fn first_line(text: Option<&str>) -> Option<String> {
    text?
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use steward_schema::resource::{Condition, ConditionStatus};

    fn status(phase: Phase, reason: Option<Reason>) -> ServerStatus {
        ServerStatus::new(phase, reason, None)
    }

    fn workspace() -> ObjectRef {
        ObjectRef::workspace("ws")
    }

    #[test]
    fn repeats_count_up_and_move_to_the_end() {
        let log = EventLog::new(10);
        let a = NewEvent::new(EventType::Warning, "Crashed", "exit 1");
        let b = NewEvent::new(EventType::Normal, "Started", "ready");
        log.record(workspace(), a.clone(), "t1");
        log.record(workspace(), b, "t2");
        log.record(workspace(), a, "t3");
        let events = log.list();
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].reason, "Crashed");
        assert_eq!(events[1].count, 2);
        assert_eq!(events[1].first_timestamp, "t1");
        assert_eq!(events[1].last_timestamp, "t3");
        assert_eq!(events[1].resource_version, 3);
        assert_eq!(
            log.since(2).iter().map(|e| &e.reason).collect::<Vec<_>>(),
            ["Crashed"]
        );
    }

    #[test]
    fn the_ring_is_bounded() {
        let log = EventLog::new(3);
        for i in 0..5 {
            log.record(
                workspace(),
                NewEvent::new(EventType::Normal, "Reloaded", format!("reload {i}")),
                "t",
            );
        }
        let messages: Vec<String> = log.list().into_iter().map(|e| e.message).collect();
        assert_eq!(messages, ["reload 2", "reload 3", "reload 4"]);
    }

    #[test]
    fn only_changes_of_phase_or_reason_are_events() {
        let ready = ServerStatus {
            pid: Some(42),
            tools: Some(vec!["a".to_owned()]),
            ..status(Phase::Ready, None)
        };
        assert_eq!(transition(Some(&ready), &ready), None);
        let e = transition(Some(&status(Phase::Starting, None)), &ready).unwrap();
        assert_eq!(
            (e.reason.as_str(), e.message.as_str()),
            ("Started", "ready (pid 42, 1 tools)")
        );
        let more_tools = ServerStatus {
            tools: Some(vec!["a".to_owned(), "b".to_owned()]),
            ..ready.clone()
        };
        assert_eq!(
            transition(Some(&ready), &more_tools).unwrap().reason,
            "ToolsChanged"
        );
    }

    #[test]
    fn failures_are_warnings_named_by_their_reason_without_the_retry_delay() {
        let mut failed = ServerStatus {
            message: Some(
                "the server exited (exit code 1); restarting in 10s\nlast stderr lines:\nboom"
                    .to_owned(),
            ),
            ..status(Phase::Failed, Some(Reason::CrashLoopBackOff))
        };
        failed.conditions.push(Condition {
            type_: "Ready".to_owned(),
            status: ConditionStatus::False,
            reason: Some("CrashLoopBackOff".to_owned()),
            message: Some("the server exited (exit code 1)".to_owned()),
            last_transition_time: "t".to_owned(),
        });
        let e = transition(Some(&status(Phase::Stopping, None)), &failed).unwrap();
        assert_eq!(e.type_, EventType::Warning);
        assert_eq!(e.reason, "CrashLoopBackOff");
        assert_eq!(e.message, "the server exited (exit code 1)");
    }

    #[test]
    fn a_reload_says_what_it_did() {
        let summary = ReloadSummary {
            trigger: "/ws/.mcp.json".to_owned(),
            added: vec!["a".to_owned()],
            failed: vec!["b".to_owned()],
            skipped: vec![steward_schema::resource::Skipped {
                kind: steward_schema::resource::ResourceKind::McpServer,
                name: "c".to_owned(),
                reason: Reason::PendingApproval,
            }],
            ..ReloadSummary::default()
        };
        let e = reloaded(&summary);
        assert_eq!(e.type_, EventType::Warning);
        assert_eq!(
            e.message,
            "/ws/.mcp.json: added a; failed b; blocked c (PendingApproval)"
        );
        let quiet = reloaded(&ReloadSummary {
            trigger: "steward reload".to_owned(),
            ..ReloadSummary::default()
        });
        assert_eq!(
            (quiet.type_, quiet.message.as_str()),
            (EventType::Normal, "steward reload: nothing to change")
        );
    }

    #[test]
    fn blocked_and_admitted() {
        let pending = ServerStatus {
            message: Some("needs approval: run `steward approve x`".to_owned()),
            ..status(Phase::Blocked, Some(Reason::PendingApproval))
        };
        let e = transition(None, &pending).unwrap();
        assert_eq!(
            (e.type_, e.reason.as_str()),
            (EventType::Warning, "PendingApproval")
        );
        let stopped = status(Phase::Blocked, Some(Reason::StoppedByUser));
        assert_eq!(transition(None, &stopped).unwrap().type_, EventType::Normal);
        let e = transition(Some(&pending), &status(Phase::Starting, None)).unwrap();
        assert_eq!(e.reason, "Admitted");
        assert_eq!(e.message, "admitted (was PendingApproval); starting");
        assert_eq!(transition(None, &status(Phase::Pending, None)), None);
    }
}

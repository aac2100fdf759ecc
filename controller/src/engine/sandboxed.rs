//! A server's sandbox in its status: `status.sandbox`, the `Sandboxed`
//! condition and the `SandboxPartial` event when it becomes Ready, and the
//! `EgressDenied` events, count and metric as its egress proxy refuses
//! requests.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use steward_schema::resource::{ConditionStatus, Enforcement, Phase, SandboxStatus, ServerStatus};

use crate::desired::snapshot::Key;
use crate::observe::clock::now_rfc3339;
use crate::observe::events::{EventType, NewEvent, ObjectRef};
use crate::observe::metrics::metrics;
use crate::observe::status::{StatusStore, set_condition};
use crate::runtime::sandbox::proxy::DenialSink;
use crate::support::sync::lock;

/// `status.sandbox` and the `Sandboxed` condition of a Ready server (its
/// process's sandbox: `None` for a remote server), with what was noted of
/// it since it started.
pub fn fold(
    s: &mut ServerStatus,
    sandbox: Option<&SandboxStatus>,
    noted: &Mutex<Vec<String>>,
    now: &str,
) {
    // The refusals counted since the server was configured stay counted.
    let denied = s.sandbox.as_ref().map_or(0, |b| b.egress_denied);
    s.sandbox = sandbox.cloned().map(|mut b| {
        b.egress_denied = b.egress_denied.max(denied);
        b.notes.extend(lock(noted).iter().cloned());
        b
    });
    let (status, reason, message) = match sandbox {
        None => (ConditionStatus::False, "NotSandboxed", None),
        Some(b) => match b.enforcement {
            Enforcement::Full => (ConditionStatus::True, "Full", None),
            Enforcement::Partial => (
                ConditionStatus::False,
                "Partial",
                Some(b.missing.join("; ")),
            ),
            Enforcement::None => (
                ConditionStatus::False,
                "NotEnforced",
                Some(b.missing.join("; ")),
            ),
        },
    };
    set_condition(
        &mut s.conditions,
        "Sandboxed",
        status,
        Some(reason),
        message.as_deref(),
        now,
    );
}

/// A code-running file (`path`) appeared in the workspace while the ready
/// server `key` could write it (it did not exist when the server started:
/// only a directory can be held absent). Who made it cannot be told — the
/// user may have — so every server that could have is named: a Warning
/// `ProtectedFileCreated` and a note in its `status.sandbox`, once.
pub fn protected_file_created(
    status: &StatusStore,
    key: &Key,
    (unpinned, noted): (&[PathBuf], &Mutex<Vec<String>>),
    path: &Path,
) {
    if !unpinned.iter().any(|p| p == path) {
        return;
    }
    let note = format!(
        "{} was created while this server could write it (it did not exist when the server started); if you did not create it, check it before your tools run it",
        path.display()
    );
    {
        let mut noted = lock(noted);
        if noted.contains(&note) {
            return;
        }
        noted.push(note.clone());
    }
    status.update(
        key,
        || ServerStatus::new(Phase::Pending, None, None),
        |s| {
            if let Some(b) = &mut s.sandbox
                && !b.notes.contains(&note)
            {
                b.notes.push(note.clone());
            }
        },
    );
    status.events().record(
        ObjectRef::server(key),
        NewEvent::new(
            EventType::Warning,
            "ProtectedFileCreated",
            format!(
                "{} appeared in the workspace while {key} could write it: a code-running file that did not exist when it started (a server cannot create the protected directories, but can create these files)",
                path.display()
            ),
        ),
        &now_rfc3339(),
    );
}

/// The `SandboxPartial` Warning of a server that just became Ready under a
/// profile this kernel does not fully enforce.
pub fn warn_partial(status: &StatusStore, key: &Key, sandbox: Option<&SandboxStatus>) {
    let Some(b) = sandbox.filter(|b| b.enforcement != Enforcement::Full) else {
        return;
    };
    status.events().record(
        ObjectRef::server(key),
        NewEvent::new(
            EventType::Warning,
            "SandboxPartial",
            format!(
                "profile \"{}\" is not fully enforced: {}",
                b.profile,
                b.missing.join("; ")
            ),
        ),
        &now_rfc3339(),
    );
}

/// Where the egress proxy of `key`'s processes reports a refused request:
/// an `EgressDenied` Warning (repeats count up), `status.sandbox
/// .egressDenied` and the metric.
pub fn egress_sink(status: Arc<StatusStore>, key: Key) -> DenialSink {
    Arc::new(move |host: &str, port: u16| {
        metrics().egress_denied(&key.name);
        status.update(
            &key,
            || ServerStatus::new(Phase::Pending, None, None),
            |s| {
                if let Some(b) = &mut s.sandbox {
                    b.egress_denied += 1;
                }
            },
        );
        status.events().record(
            ObjectRef::server(&key),
            NewEvent::new(
                EventType::Warning,
                "EgressDenied",
                format!("{host}:{port} is not in the profile's allow_host/allow_port"),
            ),
            &now_rfc3339(),
        );
    })
}

//! A server's sandbox in its status: `status.sandbox`, the `Sandboxed`
//! condition and the `SandboxPartial` event when it becomes Ready, and the
//! `EgressDenied` events, count and metric as its egress proxy refuses
//! requests.

use std::sync::Arc;

use steward_schema::resource::{ConditionStatus, Enforcement, Phase, SandboxStatus, ServerStatus};

use crate::desired::snapshot::Key;
use crate::observe::clock::now_rfc3339;
use crate::observe::events::{EventType, NewEvent, ObjectRef};
use crate::observe::metrics::metrics;
use crate::observe::status::{StatusStore, set_condition};
use crate::runtime::sandbox::proxy::DenialSink;

/// `status.sandbox` and the `Sandboxed` condition of a Ready server whose
/// process runs under `sandbox` (`None`: a remote server, or `off`).
pub fn fold(s: &mut ServerStatus, sandbox: Option<&SandboxStatus>, now: &str) {
    // The refusals counted since the server was configured stay counted.
    let denied = s.sandbox.as_ref().map_or(0, |b| b.egress_denied);
    s.sandbox = sandbox.cloned().map(|mut b| {
        b.egress_denied = b.egress_denied.max(denied);
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

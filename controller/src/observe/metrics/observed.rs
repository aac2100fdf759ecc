//! What the metrics read at scrape time instead of recording it again:
//! servers by kind, phase and reason, which servers are up, which sources
//! are valid (from the status store and the desired snapshot), and the work
//! queue's depth.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use steward_schema::resource::{Phase, ResourceKind, SourceState};

use super::kind_label;
use crate::desired::snapshot::DesiredStore;
use crate::observe::status::StatusStore;
use crate::support::sync::lock;

/// The running controller's stores.
pub struct Observed {
    pub status: Arc<StatusStore>,
    pub store: Arc<DesiredStore>,
    /// Keys waiting in the work queue for a worker.
    pub queue_depth: Box<dyn Fn() -> usize + Send + Sync>,
}

/// Every phase, so that a dashboard sees a 0 rather than no series.
const PHASES: [Phase; 7] = [
    Phase::Pending,
    Phase::Starting,
    Phase::Ready,
    Phase::Failed,
    Phase::Blocked,
    Phase::Stopping,
    Phase::Idle,
];

fn phase_label(phase: Phase) -> &'static str {
    match phase {
        Phase::Pending => "Pending",
        Phase::Starting => "Starting",
        Phase::Ready => "Ready",
        Phase::Failed => "Failed",
        Phase::Blocked => "Blocked",
        Phase::Stopping => "Stopping",
        Phase::Idle => "Idle",
    }
}

#[derive(Debug)]
pub(super) struct ObservedCollector(pub(super) Arc<Mutex<Option<Observed>>>);

impl Collector for ObservedCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let observed = lock(&self.0);
        let Some(observed) = observed.as_ref() else {
            return Ok(());
        };
        let snap = observed.store.snapshot();
        let phases = observed.status.phases(&snap);

        let mut by_phase: BTreeMap<(&'static str, &'static str, &'static str), i64> =
            BTreeMap::new();
        for kind in [ResourceKind::McpServer, ResourceKind::LspServer] {
            for phase in PHASES {
                by_phase.insert((kind_label(kind), phase_label(phase), ""), 0);
            }
        }
        for (key, phase, reason) in &phases {
            let reason = reason.map_or("", |r| r.as_str());
            *by_phase
                .entry((kind_label(key.kind), phase_label(*phase), reason))
                .or_default() += 1;
        }
        let mut family = encoder.encode_descriptor(
            "steward_servers",
            "Servers by kind, phase and reason (empty when none), as `steward status` shows them.",
            None,
            MetricType::Gauge,
        )?;
        for ((kind, phase, reason), n) in by_phase {
            let labels = [("kind", kind), ("phase", phase), ("reason", reason)];
            ConstGauge::new(n).encode(family.encode_family(&labels)?)?;
        }

        let mut family = encoder.encode_descriptor(
            "steward_server_up",
            "1 when the server is Ready, else 0, by kind and name.",
            None,
            MetricType::Gauge,
        )?;
        for (key, phase, _) in &phases {
            let labels = [("kind", kind_label(key.kind)), ("name", key.name.as_str())];
            let up = i64::from(*phase == Phase::Ready);
            ConstGauge::new(up).encode(family.encode_family(&labels)?)?;
        }

        let mut family = encoder.encode_descriptor(
            "steward_source_valid",
            "1 when the source's content is in force (valid or absent), 0 when its last edit was rejected.",
            None,
            MetricType::Gauge,
        )?;
        for source in snap.source_statuses() {
            let labels = [
                ("kind", source.kind.as_str()),
                ("path", source.path.as_str()),
            ];
            let valid = i64::from(source.state != SourceState::Invalid);
            ConstGauge::new(valid).encode(family.encode_family(&labels)?)?;
        }

        let depth = (observed.queue_depth)() as i64;
        let family = encoder.encode_descriptor(
            "steward_workqueue_depth",
            "Keys waiting in the work queue for a worker.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(depth).encode(family)?;
        Ok(())
    }
}

impl std::fmt::Debug for Observed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observed").finish_non_exhaustive()
    }
}

//! Prometheus metrics: the instruments every step of the flow records into,
//! and their exposition (Prometheus text, or OpenMetrics when asked).
//!
//! One registry per process ([`metrics`]), always there: recording is an
//! atomic increment (a counter) or a short uncontended lock (a histogram),
//! whether anybody scrapes or not. What the status store already knows —
//! servers by phase, which are up, which sources are valid, the queue's
//! depth — is not recorded twice: it is read at scrape time from the stores
//! the running controller [`attach`](Metrics::attach)es ([`observed`]),
//! so an idle controller that nobody scrapes pays nothing for it. The
//! `process_*` family comes from `/proc/self` ([`process`]); the HTTP
//! endpoint (`--metrics-listen`) is [`http`].
//!
//! Names follow the Prometheus naming rules and controller-runtime's
//! vocabulary (`steward_` prefix; counters end in `_total`, durations are
//! `_seconds` histograms). Label values are bounded: kinds, phases, reasons,
//! results, triggers, and the names of the workspace's servers (and of
//! their tools, only with `--metrics-tool-labels`) — never arguments, URLs
//! or values.

pub mod http;
mod observed;
mod process;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use steward_schema::resource::ResourceKind;
use tokio::time::Instant;

pub use observed::Observed;

use crate::support::sync::lock;

/// The `Content-Type` of the Prometheus text format (0.0.4).
pub const PROMETHEUS_TEXT: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
/// The `Content-Type` of the OpenMetrics text format (1.0.0).
pub const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

/// `McpServer` or `LspServer`, as the status names them.
pub fn kind_label(kind: ResourceKind) -> &'static str {
    match kind {
        ResourceKind::McpServer => "McpServer",
        ResourceKind::LspServer => "LspServer",
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    kind: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    trigger: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    kind: &'static str,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DevReloadLabels {
    server: String,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefreshLabels {
    server: String,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SandboxLabels {
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransportLabels {
    transport: &'static str,
}

/// `server`, `via`, `result` and, with `--metrics-tool-labels`, `tool`.
type CallLabels = Vec<(&'static str, String)>;

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Buckets of durations measured in microseconds to seconds (queue
/// waits, reconciles): 10 µs × 4ⁿ, up to about 42 s.
fn short_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.000_01, 4.0, 12))
}

/// Buckets of starts and reloads: 10 ms × 2ⁿ, up to about 82 s.
fn start_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 14))
}

/// Buckets of forwarded calls: 0.5 ms × 2.5ⁿ, up to about 75 s.
fn call_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.000_5, 2.5, 14))
}

/// The work queue's instruments (client-go's workqueue metrics).
#[derive(Debug)]
pub struct QueueInstruments {
    adds: Counter,
    retries: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
}

impl QueueInstruments {
    /// A key joined the queue (it was not queued already).
    pub fn added(&self) {
        self.adds.inc();
    }

    /// A reconcile asked to look at its key again later.
    pub fn retried(&self) {
        self.retries.inc();
    }

    /// A key waited `waited` between joining the queue and a worker taking it.
    pub fn taken(&self, waited: Duration) {
        self.queue_duration.observe(waited.as_secs_f64());
    }

    /// A worker spent `took` reconciling a key.
    pub fn worked(&self, took: Duration) {
        self.work_duration.observe(took.as_secs_f64());
    }
}

/// How a forwarded `tools/call` came to the agent endpoint (label `via`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The client called the tool by its exposed name.
    Direct,
    /// Through `call_tool` (`--expose search`).
    Search,
    /// From a `run_code` program (`--expose code`).
    Code,
}

impl Via {
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Direct => "direct",
            Via::Search => "search",
            Via::Code => "code",
        }
    }
}

/// How a forwarded `tools/call` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallResult {
    /// The server answered, not with an error.
    Ok,
    /// The server answered with a tool error (`isError: true`).
    ToolError,
    /// The server could not take it (not live, removed, blocked, or its
    /// connection closed under the call).
    Unavailable,
    /// No answer within the entry's `timeout` or the idle timeout.
    Timeout,
    /// The client cancelled it (or went away).
    Cancelled,
    /// The server answered with a protocol error, or something else.
    Error,
}

impl CallResult {
    pub fn as_str(self) -> &'static str {
        match self {
            CallResult::Ok => "ok",
            CallResult::ToolError => "tool_error",
            CallResult::Unavailable => "unavailable",
            CallResult::Timeout => "timeout",
            CallResult::Cancelled => "cancelled",
            CallResult::Error => "error",
        }
    }
}

/// Every instrument, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    queue: QueueInstruments,
    reconciles: Family<ReconcileLabels, Counter>,
    reconcile_errors: Family<KindLabels, Counter>,
    reloads: Family<ReloadLabels, Counter>,
    reload_apply: Histogram,
    restarts: Family<ServerLabels, Counter>,
    egress_denied: Family<SandboxLabels, Counter>,
    start_duration: Histograms<KindLabels>,
    clients: Family<TransportLabels, prometheus_client::metrics::gauge::Gauge>,
    tool_calls: Family<CallLabels, Counter>,
    tool_call_duration: Histograms<CallLabels>,
    list_changed: Counter,
    dev_reloads: Family<DevReloadLabels, Counter>,
    oauth_refreshes: Family<RefreshLabels, Counter>,
    tool_labels: AtomicBool,
    /// What is read at scrape time (see [`Metrics::attach`]).
    observed: Arc<Mutex<Option<Observed>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::default();
        let observed: Arc<Mutex<Option<Observed>>> = Arc::default();
        registry.register_collector(Box::new(process::ProcessCollector::new()));
        registry.register_collector(Box::new(observed::ObservedCollector(observed.clone())));
        let m = Metrics {
            registry: Registry::default(),
            queue: QueueInstruments {
                adds: Counter::default(),
                retries: Counter::default(),
                queue_duration: short_buckets(),
                work_duration: short_buckets(),
            },
            reconciles: Family::default(),
            reconcile_errors: Family::default(),
            reloads: Family::default(),
            reload_apply: start_buckets(),
            restarts: Family::default(),
            egress_denied: Family::default(),
            start_duration: Family::new_with_constructor(start_buckets),
            clients: Family::default(),
            tool_calls: Family::default(),
            tool_call_duration: Family::new_with_constructor(call_buckets),
            list_changed: Counter::default(),
            dev_reloads: Family::default(),
            oauth_refreshes: Family::default(),
            tool_labels: AtomicBool::new(false),
            observed,
        };
        let r = registry.sub_registry_with_prefix("steward");
        r.register(
            "workqueue_adds",
            "Keys added to the work queue (a key already queued is not added again)",
            m.queue.adds.clone(),
        );
        r.register(
            "workqueue_retries",
            "Reconciles that asked to look at their key again later (backoff, crash loop, restart)",
            m.queue.retries.clone(),
        );
        r.register(
            "workqueue_queue_duration_seconds",
            "How long a key waited in the work queue before a worker took it",
            m.queue.queue_duration.clone(),
        );
        r.register(
            "workqueue_work_duration_seconds",
            "How long one reconcile held its worker",
            m.queue.work_duration.clone(),
        );
        r.register(
            "reconcile",
            "Reconciles by kind and result (success, requeue, error)",
            m.reconciles.clone(),
        );
        r.register(
            "reconcile_errors",
            "Reconciles that left their server Failed (a start failed or it crashed)",
            m.reconcile_errors.clone(),
        );
        r.register(
            "reloads",
            "Reloads by trigger (start, file, resync, manual, restart) and result (success, failed, rejected)",
            m.reloads.clone(),
        );
        r.register(
            "reload_apply_duration_seconds",
            "From a settled change (a file saved, steward reload) to every server it concerns settled",
            m.reload_apply.clone(),
        );
        r.register(
            "server_restarts",
            "Starts of a server after it failed or crashed, by kind and name",
            m.restarts.clone(),
        );
        r.register(
            "sandbox_egress_denied",
            "Requests a sandboxed server's egress proxy refused (a host or port its profile does not list), by server",
            m.egress_denied.clone(),
        );
        r.register(
            "server_start_duration_seconds",
            "From spawn (or connect) to Ready: handshake and discovery included",
            m.start_duration.clone(),
        );
        r.register(
            "gateway_clients",
            "Agent clients attached to the agent endpoint, by transport (stdio, unix, http)",
            m.clients.clone(),
        );
        r.register(
            "tool_calls",
            "Forwarded tools/call requests by server, how they came (direct, search: call_tool, code: a run_code program) and result (ok, tool_error, unavailable, timeout, cancelled, error)",
            m.tool_calls.clone(),
        );
        r.register(
            "tool_call_duration_seconds",
            "How long a forwarded tools/call took, waiting for a starting server included",
            m.tool_call_duration.clone(),
        );
        r.register(
            "list_changed",
            "Changes of the agent endpoint's lists announced to clients (list_changed)",
            m.list_changed.clone(),
        );
        r.register(
            "dev_reloads",
            "Changes of a dev server's source acted on, by server and result (reloaded, build_failed, build_timeout)",
            m.dev_reloads.clone(),
        );
        r.register(
            "oauth_refresh",
            "OAuth access-token refreshes of remote servers by server and result (success; rejected: only a new sign-in helps; error: try again later)",
            m.oauth_refreshes.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The controller's stores, read at scrape time (the last controller
    /// of the process wins: `steward mcp` may run one after another).
    pub fn attach(&self, observed: Observed) {
        *lock(&self.observed) = Some(observed);
    }

    /// Label calls with their tool too (`--metrics-tool-labels`).
    pub fn set_tool_labels(&self, on: bool) {
        self.tool_labels.store(on, Ordering::Relaxed);
    }

    /// The work queue's instruments.
    pub fn queue(&self) -> &QueueInstruments {
        &self.queue
    }

    /// A reconcile of a `kind` key ended with `result`; `failed`: it left
    /// its server Failed.
    pub fn reconciled(&self, kind: ResourceKind, result: &'static str, failed: bool) {
        let kind = kind_label(kind);
        self.reconciles
            .get_or_create(&ReconcileLabels { kind, result })
            .inc();
        if failed {
            self.reconcile_errors
                .get_or_create(&KindLabels { kind })
                .inc();
        }
    }

    /// A reload ended; `took` is `None` for one rejected before it began.
    pub fn reloaded(&self, trigger: &'static str, result: &'static str, took: Option<Duration>) {
        self.reloads
            .get_or_create(&ReloadLabels { trigger, result })
            .inc();
        if let Some(took) = took {
            self.reload_apply.observe(took.as_secs_f64());
        }
    }

    /// Server `name` is started again after a failure or a crash.
    pub fn restarted(&self, kind: ResourceKind, name: &str) {
        self.restarts
            .get_or_create(&ServerLabels {
                kind: kind_label(kind),
                name: name.to_owned(),
            })
            .inc();
    }

    /// The egress proxy of MCP or LSP server `server` refused a request.
    pub fn egress_denied(&self, server: &str) {
        self.egress_denied
            .get_or_create(&SandboxLabels {
                server: server.to_owned(),
            })
            .inc();
    }

    /// A server of `kind` became Ready `took` after it was launched.
    pub fn started(&self, kind: ResourceKind, took: Duration) {
        self.start_duration
            .get_or_create(&KindLabels {
                kind: kind_label(kind),
            })
            .observe(took.as_secs_f64());
    }

    /// An agent client attached over `transport`.
    pub fn client_attached(&self, transport: &'static str) {
        self.clients
            .get_or_create(&TransportLabels { transport })
            .inc();
    }

    /// An agent client over `transport` detached.
    pub fn client_detached(&self, transport: &'static str) {
        self.clients
            .get_or_create(&TransportLabels { transport })
            .dec();
    }

    /// The agent endpoint announced a change of its lists.
    pub fn list_changed(&self) {
        self.list_changed.inc();
    }

    /// A change of dev server `server`'s source was acted on: `reloaded`
    /// (replaced), `build_failed` or `build_timeout` (kept).
    pub fn dev_reload(&self, server: &str, result: &'static str) {
        self.dev_reloads
            .get_or_create(&DevReloadLabels {
                server: server.to_owned(),
                result,
            })
            .inc();
    }

    /// An OAuth refresh for remote server `server` ended with `result`
    /// (`success`, `rejected`, `error`).
    pub fn oauth_refreshed(&self, server: &str, result: &'static str) {
        self.oauth_refreshes
            .get_or_create(&RefreshLabels {
                server: server.to_owned(),
                result,
            })
            .inc();
    }

    /// A forwarded call ended (see [`ToolCall`]).
    fn call_ended(&self, server: &str, tool: &str, via: Via, result: CallResult, took: Duration) {
        let mut labels: CallLabels = vec![("server", server.to_owned())];
        if self.tool_labels.load(Ordering::Relaxed) {
            labels.push(("tool", tool.to_owned()));
        }
        labels.push(("via", via.as_str().to_owned()));
        self.tool_call_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        labels.push(("result", result.as_str().to_owned()));
        self.tool_calls.get_or_create(&labels).inc();
    }

    /// The exposition in the Prometheus text format, or in OpenMetrics.
    pub fn encode(&self, openmetrics: bool) -> Result<String, std::fmt::Error> {
        let mut out = String::with_capacity(16 * 1024);
        if openmetrics {
            prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        } else {
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)?;
        }
        Ok(out)
    }
}

/// One forwarded `tools/call`, timed from its arrival: recorded when it is
/// dropped, under the server it was routed to (a name that leads nowhere
/// is not counted), as `cancelled` unless a result was set (a call whose
/// client went away is dropped half-way).
#[derive(Debug)]
pub struct ToolCall {
    began: Instant,
    via: Via,
    target: Option<(String, String)>,
    result: CallResult,
}

impl ToolCall {
    pub fn begin(via: Via) -> Self {
        ToolCall {
            began: Instant::now(),
            via,
            target: None,
            result: CallResult::Cancelled,
        }
    }

    /// The call goes to tool `tool` of `server`.
    pub fn to(&mut self, server: &str, tool: &str) {
        self.target = Some((server.to_owned(), tool.to_owned()));
    }

    /// How it ended.
    pub fn ended(&mut self, result: CallResult) {
        self.result = result;
    }

    /// The server and tool it went to, once known.
    pub fn target(&self) -> Option<(&str, &str)> {
        self.target.as_ref().map(|(s, t)| (s.as_str(), t.as_str()))
    }

    /// How it ended (`Cancelled` until said otherwise).
    pub fn result(&self) -> CallResult {
        self.result
    }
}

impl Drop for ToolCall {
    fn drop(&mut self) {
        if let Some((server, tool)) = &self.target {
            metrics().call_ended(server, tool, self.via, self.result, self.began.elapsed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_every_family_with_help_in_both_formats() {
        let m = Metrics::new();
        m.queue().added();
        m.reconciled(ResourceKind::McpServer, "success", false);
        m.reconciled(ResourceKind::LspServer, "error", true);
        m.reloaded("file", "success", Some(Duration::from_millis(20)));
        m.restarted(ResourceKind::McpServer, "alpha");
        m.started(ResourceKind::McpServer, Duration::from_millis(80));
        m.client_attached("stdio");
        m.call_ended(
            "alpha",
            "echo",
            Via::Direct,
            CallResult::Unavailable,
            Duration::ZERO,
        );
        m.list_changed();
        let text = m.encode(false).unwrap();
        for family in [
            "steward_workqueue_adds_total",
            "steward_workqueue_retries_total",
            "steward_workqueue_queue_duration_seconds",
            "steward_workqueue_work_duration_seconds",
            "steward_reconcile_total",
            "steward_reconcile_errors_total",
            "steward_reloads_total",
            "steward_reload_apply_duration_seconds",
            "steward_server_restarts_total",
            "steward_server_start_duration_seconds",
            "steward_gateway_clients",
            "steward_tool_calls_total",
            "steward_tool_call_duration_seconds",
            "steward_list_changed_total",
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_start_time_seconds",
        ] {
            assert!(
                text.contains(&format!("# HELP {family} ")),
                "no HELP for {family}:\n{text}"
            );
            assert!(
                text.contains(&format!("# TYPE {family} ")),
                "no TYPE for {family}:\n{text}"
            );
        }
        assert!(
            text.contains(r#"steward_reconcile_total{kind="LspServer",result="error"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"steward_tool_calls_total{server="alpha",via="direct",result="unavailable"} 1"#
            ),
            "{text}"
        );
        assert!(!text.contains("echo"), "no tool label unless asked: {text}");
        let open = m.encode(true).unwrap();
        assert!(open.ends_with("# EOF\n"), "{open}");
        assert!(open.contains("# TYPE steward_reconcile counter"), "{open}");
    }

    #[test]
    fn tool_labels_come_only_when_asked() {
        let m = Metrics::new();
        m.set_tool_labels(true);
        m.call_ended("alpha", "echo", Via::Code, CallResult::Ok, Duration::ZERO);
        let text = m.encode(false).unwrap();
        assert!(
            text.contains(
                r#"steward_tool_calls_total{server="alpha",tool="echo",via="code",result="ok"} 1"#
            ),
            "{text}"
        );
    }
}

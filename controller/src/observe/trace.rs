//! OpenTelemetry traces: spans of reloads, reconciles, server starts
//! (spawn, handshake, discovery) and forwarded `tools/call`s, exported over
//! OTLP/HTTP (protobuf) when — and only when — `OTEL_EXPORTER_OTLP_ENDPOINT`
//! or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set.
//!
//! The spans are `tracing` spans of target [`TARGET`] at TRACE level: the
//! log's filter never enables them, so without an endpoint each one costs a
//! cached "disabled" check, and there is no exporter thread and no
//! connection. With an endpoint, [`Exporter::from_env`] builds the SDK's
//! batch exporter (the standard `OTEL_*` variables are honoured:
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`,
//! `OTEL_BSP_*`, `OTEL_EXPORTER_OTLP_*`) on reqwest and rustls (ring), and
//! [`Exporter::layer`] hands only those spans to it.
//!
//! A forwarded call continues the W3C trace context its client put in
//! `params._meta` (`traceparent`, `tracestate`) and passes its own on to
//! the upstream server the same way. Spans carry names, kinds, phases and
//! results — never arguments, results, URLs or headers.

use std::sync::OnceLock;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator as _};
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use rmcp::model::{MetaObject, RequestMetaObject};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::{Layer, Registry};

use crate::observe::metrics::{CallResult, ToolCall};

/// The `tracing` target of the spans that are exported (at TRACE level).
pub const TARGET: &str = "steward::trace";

/// The variables that turn the export on.
const ENDPOINT_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// Why the exporter cannot start.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("build the OTLP HTTP client: {0}")]
    Client(String),
    #[error("build the OTLP span exporter: {0}")]
    Exporter(String),
}

/// The provider, for the flush at exit.
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// The configured OTLP export.
#[derive(Debug)]
pub struct Exporter {
    provider: SdkTracerProvider,
}

impl Exporter {
    /// The export the environment asks for; `None` when no endpoint is set.
    /// Call it outside any async runtime (the blocking HTTP client runs one
    /// of its own).
    pub fn from_env() -> Result<Option<Exporter>, TraceError> {
        let configured = ENDPOINT_VARS
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
        if !configured {
            return Ok(None);
        }
        // reqwest is built without a default crypto provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::blocking::Client::builder()
            .build()
            .map_err(|e| TraceError::Client(e.to_string()))?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_http_client(client)
            .build()
            .map_err(|e| TraceError::Exporter(e.to_string()))?;
        // The SDK reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES;
        // without either naming the service, it is "steward".
        let named = std::env::var_os("OTEL_SERVICE_NAME").is_some()
            || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|a| a.contains("service.name="));
        let mut resource = opentelemetry_sdk::Resource::builder();
        if !named {
            resource = resource.with_service_name("steward");
        }
        let resource = resource.build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let _ = PROVIDER.set(provider.clone());
        Ok(Some(Exporter { provider }))
    }

    /// The `tracing` layer that turns the spans of [`TARGET`] into
    /// OpenTelemetry spans.
    pub fn layer(&self) -> Box<dyn Layer<Registry> + Send + Sync> {
        let tracer = self.provider.tracer("steward");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_filter(Targets::new().with_target(TARGET, tracing::Level::TRACE))
            .boxed()
    }
}

/// Export what is still buffered and stop the exporter (at exit; nothing
/// when no export was configured).
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get() {
        let _ = provider.shutdown();
    }
}

struct MetaCarrier<'a>(&'a MetaObject);

impl Extractor for MetaCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.0.get(key).and_then(|v| v.as_str())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.0.keys().map(String::as_str).collect()
    }
}

struct MetaWriter<'a>(&'a mut MetaObject);

impl Injector for MetaWriter<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.0.insert(key.to_owned(), value.into());
    }
}

/// Make the trace context in `meta` (a client's `traceparent`) the parent
/// of `span`; nothing when there is none or `span` is not exported.
pub fn continue_from(span: &tracing::Span, meta: Option<&MetaObject>) {
    let Some(meta) = meta else { return };
    if span.is_disabled() || meta.get_traceparent().is_none() {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&MetaCarrier(meta));
    let _ = span.set_parent(parent);
}

/// Put the trace context of a forwarded request into its `meta` (for the
/// upstream server): `span`'s when it is exported, else the client's own
/// (`client`), unchanged, if it sent one.
pub fn pass_on(span: &tracing::Span, client: &MetaObject, meta: &mut Option<RequestMetaObject>) {
    if !span.is_disabled() {
        let meta = meta.get_or_insert_with(RequestMetaObject::default);
        TraceContextPropagator::new().inject_context(&span.context(), &mut MetaWriter(meta));
        return;
    }
    let Some(traceparent) = client.get_traceparent() else {
        return;
    };
    let meta = meta.get_or_insert_with(RequestMetaObject::default);
    meta.set_traceparent(traceparent);
    if let Some(state) = client.get_tracestate() {
        meta.set_tracestate(state);
    }
}

/// The span of one forwarded `tools/call` (request `id`), named and
/// described per the OpenTelemetry MCP conventions once it is known where
/// it went ([`tool_call_ended`]).
pub fn tool_call_span(id: &rmcp::model::RequestId) -> tracing::Span {
    tracing::trace_span!(
        target: TARGET,
        "tools/call",
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        mcp.method.name = "tools/call",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tracing::field::Empty,
        jsonrpc.request.id = %id,
        steward.server = tracing::field::Empty,
        steward.result = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// The span of one inner call of a `run_code` program: a child of the
/// run's span (`parent`), whatever the thread that asks for it.
pub fn inner_call_span(parent: &tracing::Span, id: &rmcp::model::RequestId) -> tracing::Span {
    tracing::trace_span!(
        target: TARGET,
        parent: parent,
        "tools/call",
        otel.kind = "internal",
        otel.status_code = tracing::field::Empty,
        mcp.method.name = "tools/call",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tracing::field::Empty,
        jsonrpc.request.id = %id,
        steward.via = "code",
        steward.server = tracing::field::Empty,
        steward.result = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// The span of one `run_code` call (request `id`): its inner calls are its
/// children ([`inner_call_span`]).
pub fn run_code_span(id: &rmcp::model::RequestId) -> tracing::Span {
    tracing::trace_span!(
        target: TARGET,
        "tools/call run_code",
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        mcp.method.name = "tools/call",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = "run_code",
        jsonrpc.request.id = %id,
        steward.calls = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// Describe a `run_code` span: how many inner calls it made, and the kind
/// of error that ended it, if one did.
pub fn run_code_ended(span: &tracing::Span, calls: u64, error: Option<&'static str>) {
    if span.is_disabled() {
        return;
    }
    span.record("steward.calls", calls);
    if let Some(kind) = error {
        span.record("error.type", kind);
        span.record("otel.status_code", "ERROR");
    }
}

/// Describe the call's span with where it went and how it ended.
pub fn tool_call_ended(span: &tracing::Span, call: &ToolCall) {
    if span.is_disabled() {
        return;
    }
    if let Some((server, tool)) = call.target() {
        // Started already (its context went upstream): renamed in place.
        span.context()
            .span()
            .update_name(format!("tools/call {tool}"));
        span.record("gen_ai.tool.name", tool);
        span.record("steward.server", server);
    }
    let result = call.result();
    span.record("steward.result", result.as_str());
    if result != CallResult::Ok {
        span.record("error.type", result.as_str());
        span.record("otel.status_code", "ERROR");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_built_without_an_endpoint() {
        // The test process sets no OTEL_* variable.
        if ENDPOINT_VARS.iter().all(|v| std::env::var_os(v).is_none()) {
            assert!(Exporter::from_env().unwrap().is_none());
            assert!(PROVIDER.get().is_none());
        }
    }

    #[test]
    fn a_call_that_is_not_traced_passes_its_clients_context_on() {
        let span = tracing::Span::none();
        let mut meta = MetaObject::new();
        meta.set_traceparent("00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01");
        continue_from(&span, Some(&meta));
        // Not traced: the client's context goes on unchanged.
        let mut upstream = None;
        pass_on(&span, &meta, &mut upstream);
        assert_eq!(upstream.map(|m| m.0), Some(meta));
        let mut upstream = None;
        pass_on(&span, &MetaObject::new(), &mut upstream);
        assert_eq!(upstream, None);
    }
}

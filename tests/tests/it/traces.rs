//! Envtest: OpenTelemetry traces. An OTLP/HTTP receiver in the test
//! (decoding with the official protobuf definitions, `opentelemetry-proto`)
//! gets the controller's spans: a forwarded call continues the client's
//! `traceparent` and passes its own to the upstream server in `_meta`; a
//! start has spawn, handshake and discovery as children. Without an
//! endpoint there is no exporter thread. Traffic stays on loopback.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, MetaObject, RequestMetaObject};
use serde_json::{Value, json};
use steward_tests::fake_mcp::read_record;
use steward_tests::harness::{Controller, DEADLINE, Env, eventually, fake_tools as tools, ready};

/// What the receiver got: each span with its resource's `service.name`.
#[derive(Default)]
struct Received {
    spans: Vec<(String, Span)>,
}

/// An OTLP/HTTP receiver (`POST /v1/traces`, protobuf) on loopback.
struct Receiver {
    url: String,
    got: Arc<Mutex<Received>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let got: Arc<Mutex<Received>> = Arc::default();
        let sink = got.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let sink = sink.clone();
                std::thread::spawn(move || serve(stream, &sink));
            }
        });
        Receiver { url, got }
    }

    /// Wait until a span satisfies `pred`; returns it.
    fn wait_span(&self, what: &str, pred: impl Fn(&Span) -> bool) -> Span {
        eventually(what, DEADLINE, Duration::from_millis(50), || {
            let got = self.got.lock().unwrap();
            got.spans
                .iter()
                .map(|(_, s)| s)
                .find(|s| pred(s))
                .cloned()
                .ok_or_else(|| {
                    let names: Vec<&str> = got.spans.iter().map(|(_, s)| s.name.as_str()).collect();
                    format!("received: {names:?}")
                })
        })
    }

    fn all(&self) -> Vec<(String, Span)> {
        self.got.lock().unwrap().spans.clone()
    }
}

/// HTTP/1.1 requests on one connection until it closes.
fn serve(stream: std::net::TcpStream, sink: &Mutex<Received>) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
        let mut length = 0;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        if path == "/v1/traces" {
            let request = ExportTraceServiceRequest::decode(body.as_slice())
                .expect("an OTLP ExportTraceServiceRequest");
            let mut got = sink.lock().unwrap();
            for resource in request.resource_spans {
                let service = resource
                    .resource
                    .as_ref()
                    .and_then(|r| string_attr(&r.attributes, "service.name"))
                    .unwrap_or_default();
                for scope in resource.scope_spans {
                    for span in scope.spans {
                        got.spans.push((service.clone(), span));
                    }
                }
            }
        }
        let status = if path == "/v1/traces" {
            "200 OK"
        } else {
            "404 Not Found"
        };
        let _ = writer.write_all(
            format!("HTTP/1.1 {status}\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n")
                .as_bytes(),
        );
    }
}

fn string_attr(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .map(|v| match v {
            AnyValue::StringValue(s) => s.clone(),
            other => format!("{other:?}"),
        })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The names of the controller's threads (`comm`, at most 15 bytes).
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .map(|name| name.trim().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A controller exporting to a new receiver (service
/// `steward-under-test`), with fake server `alpha` (tool `t1`) Ready.
fn traced_alpha() -> (Env, Receiver, Controller) {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["t1"])))]);
    let receiver = Receiver::start();
    let log = env.root.path().join("controller.log");
    let c = env.start_logging_to(
        &[],
        Stdio::from(std::fs::File::create(&log).unwrap()),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            ("OTEL_SERVICE_NAME", "steward-under-test"),
        ],
        log,
    );
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    (env, receiver, c)
}

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

#[test]
fn a_forwarded_call_continues_the_clients_trace_and_passes_its_own_to_the_server() {
    let (env, receiver, c) = traced_alpha();
    let threads = thread_names(c.pid());
    assert!(
        threads.iter().any(|t| t.starts_with("OpenTelemetry")),
        "an exporter thread: {threads:?}"
    );

    // The start: reconcile, then server.start with its three phases.
    let start = receiver.wait_span("alpha's start", |s| {
        s.name == "server.start" && string_attr(&s.attributes, "name").as_deref() == Some("alpha")
    });
    assert_eq!(
        string_attr(&start.attributes, "result").as_deref(),
        Some("ready")
    );
    for phase in ["spawn", "handshake", "discovery"] {
        receiver.wait_span(&format!("{phase} under the start"), |s| {
            s.name == phase && s.parent_span_id == start.span_id && s.trace_id == start.trace_id
        });
    }
    let reconcile = receiver.wait_span("the reconcile that launched it", |s| {
        s.name == "reconcile" && s.span_id == start.parent_span_id
    });
    assert_eq!(
        string_attr(&reconcile.attributes, "kind").as_deref(),
        Some("McpServer")
    );
    receiver.wait_span("the cold start's reload", |s| {
        s.name == "reload" && string_attr(&s.attributes, "trigger").as_deref() == Some("start")
    });

    // A call with the client's trace context.
    let traceparent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    let secret = "an-argument-that-never-leaves";
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let stream = tokio::net::UnixStream::connect(env.paths().mcp_socket_path())
                .await
                .unwrap();
            let client = ().serve(stream.into_split()).await.expect("initialize");
            let mut meta = MetaObject::new();
            meta.set_traceparent(traceparent.clone());
            let Value::Object(arguments) = json!({"secret": secret}) else {
                unreachable!()
            };
            let mut params = CallToolRequestParams::new("alpha__t1").with_arguments(arguments);
            params.meta = Some(RequestMetaObject(meta));
            let result = client.call_tool(params).await.expect("call");
            client.cancel().await.unwrap();
            result
        });
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let call = receiver.wait_span("the call's span", |s| s.name == "tools/call t1");
    assert_eq!(hex(&call.trace_id), TRACE_ID, "the client's trace");
    assert_eq!(
        hex(&call.parent_span_id),
        CLIENT_SPAN,
        "the client's span is the parent"
    );
    assert_eq!(
        string_attr(&call.attributes, "gen_ai.tool.name").as_deref(),
        Some("t1")
    );
    assert_eq!(
        string_attr(&call.attributes, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(
        string_attr(&call.attributes, "steward.server").as_deref(),
        Some("alpha")
    );
    assert_eq!(
        string_attr(&call.attributes, "steward.result").as_deref(),
        Some("ok")
    );

    // The server got the call's own context.
    let record = read_record(&env.record("alpha")).unwrap();
    let sent = record
        .iter()
        .filter(|e| e.event == "recv" && e.method() == Some("tools/call"))
        .find_map(|e| {
            e.message
                .pointer("/params/_meta/traceparent")?
                .as_str()
                .map(str::to_owned)
        })
        .unwrap_or_else(|| panic!("no traceparent reached the server: {record:?}"));
    assert_eq!(sent, format!("00-{TRACE_ID}-{}-01", hex(&call.span_id)));

    // Every span is the named service's; none carries the arguments.
    for (service, span) in receiver.all() {
        assert_eq!(service, "steward-under-test", "{}", span.name);
        let attributes = format!("{:?}", span.attributes);
        assert!(!attributes.contains(secret), "{}: {attributes}", span.name);
    }
}

#[test]
fn without_an_endpoint_nothing_is_exported_and_no_exporter_thread_runs() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["t1"])))]);
    let c = env.start(&[]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let threads = thread_names(c.pid());
    assert!(!threads.is_empty(), "the controller's threads are readable");
    assert!(
        !threads
            .iter()
            .any(|t| t.starts_with("OpenTelemetry") || t.starts_with("reqwest-intern")),
        "no exporter thread without an endpoint: {threads:?}"
    );
    assert!(
        !c.log_text().contains("exporting traces"),
        "{}",
        c.log_text()
    );
}

#[test]
fn a_run_code_programs_inner_calls_are_children_of_its_span() {
    let (env, receiver, _c) = traced_alpha();
    let traceparent = format!("00-{TRACE_ID}-{CLIENT_SPAN}-01");
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let command = tokio::process::Command::from(env.command(&["mcp", "--expose", "code"]));
            let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let client = ().serve(transport).await.expect("initialize");
            let mut meta = MetaObject::new();
            meta.set_traceparent(traceparent.clone());
            let Value::Object(arguments) = json!({"code":
                "await tools.alpha.t1({n: 1}); return await tools.alpha.t1({n: 2});"})
            else {
                unreachable!()
            };
            let mut params = CallToolRequestParams::new("run_code").with_arguments(arguments);
            params.meta = Some(RequestMetaObject(meta));
            let result = client.call_tool(params).await.expect("call");
            client.cancel().await.unwrap();
            result
        });
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let run = receiver.wait_span("run_code's span", |s| s.name == "tools/call run_code");
    assert_eq!(hex(&run.trace_id), TRACE_ID, "the client's trace");
    assert_eq!(hex(&run.parent_span_id), CLIENT_SPAN);
    let inner: Vec<Span> = eventually(
        "both inner calls",
        DEADLINE,
        Duration::from_millis(50),
        || {
            let inner: Vec<Span> = receiver
                .all()
                .into_iter()
                .map(|(_, s)| s)
                .filter(|s| s.name == "tools/call t1")
                .collect();
            if inner.len() == 2 {
                Ok(inner)
            } else {
                Err(format!("{} so far", inner.len()))
            }
        },
    );
    for span in &inner {
        assert_eq!(span.parent_span_id, run.span_id, "a child of the run");
        assert_eq!(span.trace_id, run.trace_id);
        assert_eq!(
            string_attr(&span.attributes, "steward.via").as_deref(),
            Some("code")
        );
        assert_eq!(
            string_attr(&span.attributes, "steward.result").as_deref(),
            Some("ok")
        );
    }
    // Each inner call passed its own context to the server.
    let sent: Vec<String> = read_record(&env.record("alpha"))
        .unwrap()
        .iter()
        .filter(|e| e.event == "recv" && e.method() == Some("tools/call"))
        .filter_map(|e| {
            e.message
                .pointer("/params/_meta/traceparent")?
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    let expected: Vec<String> = inner
        .iter()
        .map(|s| format!("00-{TRACE_ID}-{}-01", hex(&s.span_id)))
        .collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent.iter().all(|t| expected.contains(t)),
        "{sent:?} vs {expected:?}"
    );
}

//! Envtest: the Prometheus endpoint (`steward run --metrics-listen`),
//! scraped by a real Prometheus server (the Debian package `prometheus`,
//! installed by `.ci/run`) whose HTTP API the tests query, and parsed by a
//! second, independent parser (the PyPI `prometheus-client`, in the peers
//! venv). A missing peer fails the test. Traffic stays on loopback.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use steward_schema::resource::Reason;
use steward_tests::harness::{
    DEADLINE, Env, eventually, fake_tools as tools, mcp, mcp_servers, ready, with_version,
};

use crate::common::call_tool;
use crate::real_clients::python;

/// Every family the controller exposes (the names Prometheus stores; a
/// histogram's series are `_bucket`, `_sum` and `_count`).
pub const FAMILIES: &[&str] = &[
    "steward_workqueue_depth",
    "steward_workqueue_adds_total",
    "steward_workqueue_retries_total",
    "steward_workqueue_queue_duration_seconds",
    "steward_workqueue_work_duration_seconds",
    "steward_reconcile_total",
    "steward_reconcile_errors_total",
    "steward_reloads_total",
    "steward_reload_apply_duration_seconds",
    "steward_source_valid",
    "steward_servers",
    "steward_server_restarts_total",
    "steward_server_start_duration_seconds",
    "steward_server_up",
    "steward_gateway_clients",
    "steward_tool_calls_total",
    "steward_tool_call_duration_seconds",
    "steward_list_changed_total",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
];

/// An HTTP/1.0 exchange on loopback: (status, head, body).
pub fn http_get(addr: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String, String) {
    let mut request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the response");
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {head}"));
    (status, head.to_owned(), body.to_owned())
}

/// The `host:port` the controller's metrics endpoint listens on (it says
/// so in its log once bound).
pub fn metrics_addr(log: &dyn Fn() -> String) -> String {
    eventually(
        "the metrics endpoint's address in the log",
        DEADLINE,
        Duration::from_millis(20),
        || {
            let text = log();
            text.lines()
                .filter(|l| l.contains("metrics endpoint listening"))
                .find_map(|l| l.split("url=http://").nth(1))
                .and_then(|rest| rest.split("/metrics").next())
                .map(str::to_owned)
                .ok_or(text)
        },
    )
}

/// A free loopback port (bound, then released for the peer to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An executable on PATH; fails the test (never skips it) when missing.
pub fn on_path(name: &str, package: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("real peer {package} is missing: no {name} on PATH (run .ci/run, which installs it with apt)")
        })
}

/// A real Prometheus server scraping one target every second, its data in
/// the test's sandbox.
pub struct Prometheus {
    child: Child,
    pub addr: String,
    log: PathBuf,
}

impl Prometheus {
    pub fn start(dir: &Path, target: &str) -> Prometheus {
        let bin = on_path("prometheus", "prometheus (Debian)");
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
                 scrape_configs:\n  - job_name: steward\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let log = dir.join("prometheus.log");
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start prometheus");
        let mut prometheus = Prometheus { child, addr, log };
        let deadline = Duration::from_secs(60);
        eventually(
            "prometheus to be ready",
            deadline,
            Duration::from_millis(100),
            || {
                if let Ok(Some(code)) = prometheus.child.try_wait() {
                    panic!("prometheus exited with {code}\n{}", prometheus.log_text());
                }
                match TcpStream::connect(&prometheus.addr) {
                    Ok(_) if http_get(&prometheus.addr, "/-/ready", &[]).0 == 200 => Ok(()),
                    _ => Err(""),
                }
            },
        );
        prometheus
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The instant query's samples: labels → value.
    pub fn query(&self, promql: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        let (status, _, body) = http_get(
            &self.addr,
            &format!("/api/v1/query?query={}", percent_encode(promql)),
            &[],
        );
        assert_eq!(status, 200, "query {promql}: {body}");
        let answer: Value = serde_json::from_str(&body).unwrap();
        answer["data"]["result"]
            .as_array()
            .unwrap_or_else(|| panic!("query {promql}: {body}"))
            .iter()
            .map(|sample| {
                let labels = serde_json::from_value(sample["metric"].clone()).unwrap();
                let value = sample["value"][1].as_str().unwrap().parse().unwrap();
                (labels, value)
            })
            .collect()
    }

    /// The one value of `promql`, if it has one.
    pub fn value(&self, promql: &str) -> Option<f64> {
        let samples = self.query(promql);
        assert!(samples.len() <= 1, "{promql}: {samples:?}");
        samples.first().map(|(_, v)| *v)
    }

    /// Wait until `promql` has a value that `pred` accepts; returns it.
    pub fn wait_value(&self, what: &str, promql: &str, pred: impl Fn(f64) -> bool) -> f64 {
        eventually(what, DEADLINE, Duration::from_millis(250), || {
            match self.value(promql) {
                Some(v) if pred(v) => Ok(v),
                seen => Err(format!(
                    "{promql} = {seen:?}\ntargets: {}",
                    http_get(&self.addr, "/api/v1/targets", &[]).2
                )),
            }
        })
    }

    /// Whether the last scrape of the target succeeded (its error if not).
    pub fn target_health(&self) -> (String, String) {
        let body = http_get(&self.addr, "/api/v1/targets", &[]).2;
        let targets: Value = serde_json::from_str(&body).unwrap();
        let target = &targets["data"]["activeTargets"][0];
        (
            target["health"].as_str().unwrap_or("").to_owned(),
            target["lastError"].as_str().unwrap_or("").to_owned(),
        )
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The exposition as the PyPI parser reads it: family → (type, help,
/// sample names).
fn python_parse(
    exposition: &str,
    format: &str,
) -> BTreeMap<String, (String, String, BTreeSet<String>)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/parse_exposition.py");
    let mut child = Command::new(python())
        .arg(script)
        .arg(format)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the Python parser");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the PyPI prometheus-client parser refused the {format} exposition: {}\n{exposition}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: BTreeMap<String, Value> = serde_json::from_slice(&out.stdout).unwrap();
    parsed
        .into_iter()
        .map(|(name, family)| {
            let samples = family["samples"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s[0].as_str().unwrap().to_owned())
                .collect();
            let kind = family["type"].as_str().unwrap().to_owned();
            let help = family["help"].as_str().unwrap().to_owned();
            (name, (kind, help, samples))
        })
        .collect()
}

/// Every exposed family in `parsed` has HELP text and at least one sample
/// named as [`FAMILIES`] says.
fn assert_every_family(
    parsed: &BTreeMap<String, (String, String, BTreeSet<String>)>,
    format: &str,
) {
    let samples: BTreeSet<&String> = parsed.values().flat_map(|(_, _, s)| s).collect();
    for family in FAMILIES {
        let histogram = format!("{family}_count");
        assert!(
            samples.contains(&family.to_string()) || samples.contains(&histogram),
            "{format}: no sample of {family} in {samples:?}"
        );
    }
    for (name, (_, help, _)) in parsed {
        assert!(!help.is_empty(), "{format}: {name} has no HELP");
    }
}

#[test]
fn a_real_prometheus_scrapes_servers_reconciles_restarts_and_unavailable_calls() {
    let env = Env::new();
    let alpha = env.fake_mcp("alpha", tools(&["t1"]));
    env.user_mcp_servers(&[("alpha", alpha.clone())]);
    // Project scope: pending approval, never started.
    env.write(
        ".mcp.json",
        &mcp_servers(&[("gated", env.fake_mcp("gated", tools(&["g1"])))]),
    );
    // No periodic resync: reconciles come only from what the test does.
    let c = env.start(&["--metrics-listen", "127.0.0.1:0", "--resync-secs", "3600"]);
    c.wait_for("alpha Ready, gated pending", |s| {
        ready(s, "alpha")
            && mcp(s, "gated").is_some_and(|m| m.status.reason == Some(Reason::PendingApproval))
    });
    let target = metrics_addr(&|| c.log_text());
    let prom = Prometheus::start(env.root.path(), &target);

    prom.wait_value(
        "alpha up",
        r#"steward_server_up{kind="McpServer",name="alpha"}"#,
        |v| v == 1.0,
    );
    prom.wait_value(
        "one server pending approval",
        r#"steward_servers{kind="McpServer",phase="Blocked",reason="PendingApproval"}"#,
        |v| v == 1.0,
    );
    prom.wait_value(
        "one Ready",
        r#"steward_servers{kind="McpServer",phase="Ready",reason=""}"#,
        |v| v == 1.0,
    );
    let (health, error) = prom.target_health();
    assert_eq!(health, "up", "the scrape failed: {error}");

    // An edit: the reload and its reconciles show up.
    let before = prom.wait_value(
        "the cold start's reconciles",
        r#"sum(steward_reconcile_total{kind="McpServer"})"#,
        |v| v >= 2.0,
    );
    env.user_mcp_servers(&[("alpha", with_version(&alpha, "2"))]);
    c.wait_for("alpha restarted for the edit", |s| {
        s.controller
            .last_reload
            .as_ref()
            .is_some_and(|r| r.restarted.contains(&"alpha".to_owned()))
    });
    prom.wait_value(
        "reconciles grow after the edit",
        r#"sum(steward_reconcile_total{kind="McpServer"})"#,
        |v| v > before,
    );
    prom.wait_value(
        "a file reload succeeded",
        r#"steward_reloads_total{trigger="file",result="success"}"#,
        |v| v >= 1.0,
    );
    prom.wait_value(
        "the reload's apply duration was observed",
        "steward_reload_apply_duration_seconds_count",
        |v| v >= 2.0,
    );

    // A call to the pending server is refused (unavailable); one to alpha works.
    let refused = call_tool(&env, "gated__g1");
    assert_eq!(refused["isError"], json!(true), "{refused}");
    let answered = call_tool(&env, "alpha__t1");
    assert_eq!(answered["isError"], json!(false), "{answered}");
    prom.wait_value(
        "the refused call",
        r#"steward_tool_calls_total{server="gated",result="unavailable"}"#,
        |v| v == 1.0,
    );
    prom.wait_value(
        "the answered call",
        r#"steward_tool_calls_total{server="alpha",result="ok"}"#,
        |v| v == 1.0,
    );
    prom.wait_value(
        "its duration",
        r#"steward_tool_call_duration_seconds_count{server="alpha"}"#,
        |v| v == 1.0,
    );

    // A server that crashes is restarted, and counted.
    let mut crashing = tools(&["c1"]);
    crashing.crash_after_listed_ms = Some(300);
    env.user_mcp_servers(&[
        ("alpha", with_version(&alpha, "2")),
        ("crashy", env.fake_mcp("crashy", crashing)),
    ]);
    prom.wait_value(
        "crashy's restarts",
        r#"steward_server_restarts_total{kind="McpServer",name="crashy"}"#,
        |v| v >= 1.0,
    );
    prom.wait_value(
        "reconcile errors of the crashes",
        r#"steward_reconcile_errors_total{kind="McpServer"}"#,
        |v| v >= 1.0,
    );
    prom.wait_value("process memory", "process_resident_memory_bytes", |v| {
        v > 1e6
    });

    // Every family, with HELP, in both formats, as a second parser reads them.
    let (status, head, text) = http_get(&target, "/metrics", &[]);
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    assert_every_family(&python_parse(&text, "text"), "text");
    let (status, head, open) = http_get(
        &target,
        "/metrics",
        &[("Accept", "application/openmetrics-text;version=1.0.0")],
    );
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert_every_family(&python_parse(&open, "openmetrics"), "openmetrics");
}

#[test]
fn a_non_loopback_metrics_address_needs_a_private_token_and_scrapes_present_it() {
    let env = Env::new();
    let out = env.steward(&["run", "--metrics-listen", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--metrics-token-file"), "{stderr}");

    let token = env.root.path().join("metrics-token");
    std::fs::write(&token, "s3cret\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let token_arg = token.to_str().unwrap();
    let out = env.steward(&[
        "run",
        "--metrics-listen",
        "127.0.0.1:0",
        "--metrics-token-file",
        token_arg,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("chmod 600"), "{stderr}");

    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let c = env.start(&[
        "--metrics-listen",
        "127.0.0.1:0",
        "--metrics-token-file",
        token_arg,
    ]);
    let addr = metrics_addr(&|| c.log_text());
    let (status, head, _) = http_get(&addr, "/metrics", &[]);
    assert_eq!(status, 401, "{head}");
    assert!(
        head.contains("WWW-Authenticate: Bearer") || head.contains("www-authenticate: Bearer"),
        "{head}"
    );
    let (status, _, _) = http_get(&addr, "/metrics", &[("Authorization", "Bearer wrong")]);
    assert_eq!(status, 401);
    let (status, _, body) = http_get(&addr, "/metrics", &[("Authorization", "Bearer s3cret")]);
    assert_eq!(status, 200);
    assert!(body.contains("steward_servers{"), "{body}");
}

/// `examples/observability/`.
fn observability_example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("examples/observability")
}

/// The metric names a PromQL expression reads (`steward_*`, `process_*`),
/// a histogram's series named by their family.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut word = String::new();
    for ch in expr.chars().chain(std::iter::once(' ')) {
        if ch.is_ascii_alphanumeric() || ch == '_' || ch == ':' {
            word.push(ch);
            continue;
        }
        if word.starts_with("steward_") || word.starts_with("process_") {
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| word.strip_suffix(suffix))
                .filter(|base| FAMILIES.contains(base))
                .unwrap_or(&word);
            names.insert(family.to_owned());
        }
        word.clear();
    }
    names
}

#[test]
fn the_example_scrape_config_passes_promtool_and_the_dashboard_and_alerts_read_only_exposed_metrics()
 {
    let dir = observability_example();
    let promtool = on_path("promtool", "prometheus (Debian)");
    let out = Command::new(promtool)
        .arg("check")
        .arg("config")
        .arg(dir.join("prometheus.yml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool refused the example:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("steward-dashboard.json")).unwrap())
            .unwrap();
    let dashboard_exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().iter())
        .map(|t| t["expr"].as_str().unwrap().to_owned())
        .collect();
    let alerts: Value =
        yaml_serde::from_str(&std::fs::read_to_string(dir.join("alerts.yml")).unwrap()).unwrap();
    let alert_exprs: Vec<String> = alerts["groups"][0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["expr"].as_str().unwrap().to_owned())
        .collect();
    let mut read = BTreeSet::new();
    for expr in dashboard_exprs.iter().chain(&alert_exprs) {
        let names = metric_names(expr);
        assert!(
            !names.is_empty() || expr.contains("up{"),
            "reads no metric: {expr}"
        );
        read.extend(names);
    }
    let unknown: Vec<&String> = read
        .iter()
        .filter(|n| !FAMILIES.contains(&n.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "the example reads what Steward does not expose: {unknown:?}"
    );
    for wanted in [
        "steward_servers",
        "steward_server_restarts_total",
        "steward_reconcile_total",
        "steward_workqueue_work_duration_seconds",
        "steward_workqueue_depth",
        "steward_tool_calls_total",
        "steward_tool_call_duration_seconds",
    ] {
        assert!(read.contains(wanted), "the dashboard shows no {wanted}");
    }

    // Against a live controller, a real Prometheus evaluates every one.
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["t1"])))]);
    let c = env.start(&["--metrics-listen", "127.0.0.1:0"]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let answered = call_tool(&env, "alpha__t1");
    assert_eq!(answered["isError"], json!(false), "{answered}");
    let prom = Prometheus::start(env.root.path(), &metrics_addr(&|| c.log_text()));
    prom.wait_value(
        "the call scraped",
        r#"steward_tool_calls_total{server="alpha",result="ok"}"#,
        |v| v == 1.0,
    );
    for expr in dashboard_exprs.iter().chain(&alert_exprs) {
        prom.query(expr);
    }
    let phases = prom.query("sum by (kind, phase) (steward_servers)");
    assert_eq!(phases.len(), 14, "two kinds, seven phases: {phases:?}");
}

//! `steward-lsp-bench`: what an `.lsp.json` edit costs under the real
//! controller, with fake language servers.
//!
//! Measures, with N fake stdio language servers in `.lsp.json` (default 20):
//! reload latency (file rename → edited server `Ready` with the new
//! `observedHash`, status polled every 2 ms through the control socket) over
//! a number of edits spaced beyond the debounce window, restarts of the
//! unchanged servers (from the fakes' record files), and the controller's
//! idle CPU and peak RSS (and, at the end, how much of its resident set is
//! its own memory and how much its binary's code pages), with the
//! controller at its default log level.
//! Prints one JSON object on stdout.
//!
//! With `--registration-storm`, instead: one fake language server sends
//! `client/registerCapability` 1000 times a second for 10 s
//! (`--per-second`, `--storm-ms`), and the controller's CPU over the storm
//! is printed with how many of the requests were answered.
//!
//! `cargo build --release -p steward-tests --bins && target/release/steward-lsp-bench`

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use steward_schema::resource::{Item, Phase, WorkspaceStatus};
use steward_tests::fake_lsp::{Config, Event, RegistrationStorm, read_records};
use steward_tests::harness::Env;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn lsp_json(entries: &[(String, Value)]) -> String {
    let map: serde_json::Map<String, Value> = entries.iter().cloned().collect();
    serde_json::to_string_pretty(&Value::Object(map)).unwrap()
}

fn ready_with(s: &WorkspaceStatus, name: &str, hash: Option<&str>) -> bool {
    s.items.iter().any(|i| match i {
        Item::LspServer(l) if l.metadata.name == name => {
            l.status.phase == Phase::Ready
                && hash.is_none_or(|h| l.status.observed_hash.as_deref() == Some(h))
                && l.status.observed_hash.as_deref() == Some(l.spec.config_hash.as_str())
        }
        _ => false,
    })
}

fn proc_cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

/// A `/proc/PID/status` figure in MB (`VmHWM`, `RssAnon`, `RssFile`).
fn status_mb(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A sandbox whose controller logs at the product's default filter, not at
/// the envtests' debug level (a debug line per message would be much of
/// what is measured).
fn quiet_env() -> Env {
    let env = Env::new();
    env.set_var("RUST_LOG", "info,rmcp=warn");
    env
}

/// `--registration-storm` (see the module doc).
fn registration_storm() -> Value {
    let per_second = arg("--per-second", 1000);
    let duration_ms = arg("--storm-ms", 10_000);
    let env = quiet_env();
    let report = env.root.path().join("storm.json");
    let config = Config {
        registration_storm: Some(RegistrationStorm {
            per_second,
            duration_ms,
            after_ms: 2000,
            report: report.clone(),
        }),
        ..Config::default()
    };
    let entry = env.fake_lsp("storm", config, &[".st"]);
    env.write(".lsp.json", &lsp_json(&[("storm".to_owned(), entry)]));
    let c = env.start(&[]);
    c.wait_for_within("the language server Ready", Duration::from_secs(60), |s| {
        ready_with(s, "storm", None)
    });
    let pid = c.pid();
    let phase = |want: &str, within: Duration, every: Duration| -> Value {
        let deadline = Instant::now() + within;
        loop {
            let seen = std::fs::read_to_string(&report)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .filter(|v| v["phase"] == want);
            if let Some(v) = seen {
                return v;
            }
            assert!(Instant::now() < deadline, "the storm's {want} never came");
            std::thread::sleep(every);
        }
    };
    phase("begin", Duration::from_secs(30), Duration::from_millis(1));
    let (t0, ticks0) = (Instant::now(), proc_cpu_ticks(pid));
    let end = phase(
        "end",
        Duration::from_millis(duration_ms) + Duration::from_secs(30),
        Duration::from_millis(10),
    );
    let (wall_s, ticks) = (t0.elapsed().as_secs_f64(), proc_cpu_ticks(pid) - ticks0);
    let cpu_pct = ticks as f64 / 100.0 / wall_s * 100.0;
    let status = c.status();
    let still_ready = ready_with(&status, "storm", None);
    json!({
        "perSecond": per_second,
        "durationMs": duration_ms,
        "requestsSent": end["sent"],
        "answered": end["answered"],
        "wallS": (wall_s * 1000.0).round() / 1000.0,
        "controllerCpuPct": (cpu_pct * 1000.0).round() / 1000.0,
        "serverStillReady": still_ready,
        "target": { "controllerCpuPct": "<= 2", "met": cpu_pct <= 2.0 && still_ready && end["sent"] == end["answered"] },
    })
}

fn main() {
    if std::env::args().any(|a| a == "--registration-storm") {
        let out = json!({ "registrationStorm": registration_storm() });
        println!("{}", serde_json::to_string_pretty(&out).unwrap());
        return;
    }
    let n = arg("--servers", 20) as usize;
    let edits = arg("--edits", 20) as usize;
    let idle_s = arg("--idle-secs", 30);
    let env = quiet_env();
    let entry = |name: &str, version: usize| {
        let mut e = env.fake_lsp(name, Config::default(), &[&format!(".x{name}")]);
        e["env"]["VERSION"] = json!(version.to_string());
        e
    };
    let names: Vec<String> = (0..n).map(|i| format!("l{i}")).collect();
    let mut entries: Vec<(String, Value)> =
        names.iter().map(|nm| (nm.clone(), entry(nm, 0))).collect();
    env.write(".lsp.json", &lsp_json(&entries));

    let t0 = Instant::now();
    let c = env.start(&[]);
    c.wait_for_within(
        "every language server Ready",
        Duration::from_secs(120),
        |s| names.iter().all(|nm| ready_with(s, nm, None)),
    );
    let cold_ms = t0.elapsed().as_secs_f64() * 1000.0;
    let pid = c.pid();

    // Idle cost.
    let ticks_per_s = 100.0;
    let before = proc_cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(idle_s));
    let idle_pct = (proc_cpu_ticks(pid) - before) as f64 / ticks_per_s / idle_s as f64 * 100.0;

    // Edits of one server, spaced beyond the 300 ms window.
    let edited = &names[0];
    let mut latencies = Vec::new();
    let cpu_before = proc_cpu_ticks(pid);
    for v in 1..=edits {
        entries[0].1 = entry(edited, v);
        let started = Instant::now();
        env.write(".lsp.json", &lsp_json(&entries));
        let old = c.status();
        let old_hash = old
            .items
            .iter()
            .find(|i| i.name() == edited)
            .and_then(|i| i.status().observed_hash.clone());
        loop {
            if let Some(s) = c.try_status()
                && ready_with(&s, edited, None)
                && s.items
                    .iter()
                    .find(|i| i.name() == edited)
                    .and_then(|i| i.status().observed_hash.clone())
                    != old_hash
            {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "edit {v} never applied"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
        std::thread::sleep(Duration::from_millis(400));
    }
    let cpu_ms_per_edit = (proc_cpu_ticks(pid) - cpu_before) as f64 * 10.0 / edits as f64;
    let unchanged_restarts: usize = names[1..]
        .iter()
        .map(|nm| {
            read_records(&env.record(nm))
                .iter()
                .filter(|r| r.event == Event::Start)
                .count()
                .saturating_sub(1)
        })
        .sum();
    let rss = status_mb(pid, "VmHWM");
    // What the resident set is made of at the end: the controller's own
    // memory, and the pages of its binary's code it has run (file-backed,
    // shared with every process of the binary, dropped under pressure).
    let (anon, file) = (status_mb(pid, "RssAnon"), status_mb(pid, "RssFile"));
    latencies.sort_by(f64::total_cmp);
    let out = json!({
        "servers": n,
        "coldStartAllReadyMs": (cold_ms * 10.0).round() / 10.0,
        "idle": { "windowS": idle_s, "controllerCpuPct": (idle_pct * 1000.0).round() / 1000.0 },
        "reload": {
            "edits": edits,
            "how": "rename .lsp.json → edited server Ready with a new observedHash; status polled every 2 ms over the control socket (includes that poll's cost)",
            "p50Ms": (percentile(&latencies, 50.0) * 10.0).round() / 10.0,
            "p95Ms": (percentile(&latencies, 95.0) * 10.0).round() / 10.0,
            "maxMs": (latencies.last().copied().unwrap_or(0.0) * 10.0).round() / 10.0,
        },
        "controllerCpuMsPerEdit": (cpu_ms_per_edit * 10.0).round() / 10.0,
        "unchangedServerRestarts": unchanged_restarts,
        "controllerPeakRssMb": (rss * 10.0).round() / 10.0,
        "controllerRssAtEnd": {
            "anonMb": (anon * 10.0).round() / 10.0,
            "binaryPagesMb": (file * 10.0).round() / 10.0,
        },
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}

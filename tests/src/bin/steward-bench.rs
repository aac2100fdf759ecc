//! `steward-bench`: benchmarks of the real controller (`steward-under-test
//! run`) driving fake MCP servers, side by side with `mcp-hub` (npm) on the
//! same fake servers when it is installed. Prints one JSON summary on stdout;
//! progress goes to stderr. Every number's key names its unit (`Ms`, `Mb`,
//! `Pct`, ...); counts are plain integers.
//!
//! ```text
//! cargo build --release -p steward-tests --bins
//! target/release/steward-bench [--quick]
//!     [--only reload,burst,cold,cost,mcp-hub,readiness,gate,gateway]
//!     [--observe watch|poll] [--edits N] [--debounce-ms MS] [--mcp-hub PATH | --no-mcp-hub]
//!     [--reload-ns 1,10,100] [--cost-ns 10,50,500] [--controller-arg ARG]... [--out FILE]
//!     [--cold-ns 10,100,500] [--init-delay-ms 300] [--start-cpu-ms 10]
//! ```
//!
//! `readiness` and `gate` (issue 11: cold starts of `npx`-like servers,
//! idle CPU, `status` time and stop at N = 500, edits while 50 slow servers
//! start) are in `src/bench/readiness.rs`; `gateway` (issue 8: the agent
//! endpoint's added latency, throughput, list_changed delay, RSS) in
//! `src/bench/gateway.rs`. Their module docs say how they measure.
//!
//! `--quick` (about 25 s) runs every scenario at small sizes; it is meant for
//! a smoke test (no errors, no churn, at most 2 restarts for the burst), not
//! for figures: its idle window is shorter than the ping period and its CPU
//! windows are a few ticks long.
//!
//! How things are measured (the JSON repeats the essentials under `method`):
//! - Everything runs in temp dirs (QWEN_HOME, HOME, system settings paths as
//!   the envtest harness sets them); the controller runs with its defaults
//!   except `--debounce-ms` (passed explicitly so the spacing of edits is
//!   known) and RUST_LOG unset (the product default, `info`).
//! - An edit is a write of the whole user `settings.json` by rename; its
//!   clock starts right before the `rename(2)` and stops when the edited
//!   server is seen `Ready` with `observedHash == spec.configHash`, the new
//!   env in its spec and a new pid. The status is observed through the
//!   control socket's `watch` stream (pushed on every change, timestamped on
//!   receipt by a dedicated reader thread) or, with `--observe poll`, by a
//!   `status` request every 2 ms.
//! - Edits are spaced so each one is a leading edge of the debounce: the next
//!   write comes at least `debounce + 100 ms` after the previous one.
//! - Restarts are counted from the fakes' record files ("start" events),
//!   per edit window, so a restart of any server that was not the edit's
//!   target counts as churn.
//! - CPU is `utime + stime` of the controller from `/proc/<pid>/stat` (clock
//!   ticks, whole process including exited threads) and, as a
//!   high-resolution cross-check, the sum of `/proc/<pid>/task/*/schedstat`
//!   (ns, live threads only; used for the targets when no thread exited in
//!   the window). Cost windows are whole multiples of the 15 s ping period:
//!   pings of servers started together come in rounds. The CPU *of an edit*
//!   (the N = 500 / N = 10 target) is the edit window's CPU less the idle
//!   rate measured just before at the same N — the pings of N idle servers,
//!   which have their own target — per edit; the total is reported beside
//!   it. Peak RSS is `VmHWM`.
//! - mcp-hub runs with `--watch` on its own config file (same fakes, same
//!   edits); "connected again" is its new process in the record file, then
//!   `connected` from `POST /api/servers/info`.
//! - `machineBusyPctPerScenario` is the whole machine's CPU use during each
//!   scenario, so a run disturbed by other work shows it; `binaries` says
//!   whether any source is newer than the controller binary measured.
//!
//! Every process started here (controllers, mcp-hub, the fakes they spawn)
//! is stopped when its guard drops, on error too, and on SIGINT/SIGTERM.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use steward::control::{self, Request, Response};
use steward_schema::resource::{Item, McpServer, Phase, WorkspaceStatus};
use steward_tests::fake_mcp::{self, FakeMcpConfig, read_record};
use steward_tests::harness::{Env, alive, signal};

#[path = "../bench/gateway.rs"]
mod gateway;
#[path = "../bench/readiness.rs"]
mod readiness;

/// Added between the debounce window and the next write.
const SPACING_MARGIN: Duration = Duration::from_millis(100);
/// Bound on any single wait for a condition.
const DEADLINE: Duration = Duration::from_secs(30);
/// The controller's default MCP ping interval (`--ping-interval-ms`): pings
/// of servers started together come in rounds of this period.
const PING_PERIOD: Duration = Duration::from_secs(15);
/// Env var changed by edits (part of the connection fingerprint).
const EDIT_KEY: &str = "BENCH_EDIT";

// ---------------------------------------------------------------------------
// Options

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Observe {
    Watch,
    Poll,
}

#[derive(Debug, Clone)]
struct Opts {
    quick: bool,
    only: BTreeSet<String>,
    observe: Observe,
    edits: usize,
    debounce_ms: u64,
    mcp_hub: Option<PathBuf>,
    no_mcp_hub: bool,
    out: Option<PathBuf>,
    bin_dir: PathBuf,
    reload_ns: Option<Vec<usize>>,
    cost_ns: Option<Vec<usize>>,
    controller_args: Vec<String>,
    /// Server counts of the issue 11 cold starts (`--cold-ns`).
    cold_ns: Option<Vec<usize>>,
    /// `initializeDelayMs` of the issue 11 fakes (an `npx` server's start).
    init_delay_ms: u64,
    /// `startCpuMs` of the issue 11 fakes.
    start_cpu_ms: u64,
}

const SCENARIOS: &[&str] = &[
    "reload",
    "burst",
    "cold",
    "cost",
    "mcp-hub",
    "readiness",
    "gate",
    "gateway",
];

const USAGE: &str = "\
steward-bench: benchmarks of `steward run` with fake MCP servers (JSON on stdout)

Options:
  --quick               small smoke run (< 30 s)
  --only A,B            scenarios: reload, burst, cold, cost, mcp-hub, readiness, gate,
                        gateway (default: all)
  --observe watch|poll  how status is observed (default: watch stream)
  --edits N             edits per reload level (default 24; quick 4)
  --debounce-ms MS      passed to `steward run` (default 300, the product default)
  --mcp-hub PATH        the mcp-hub executable (default: <repo>/.peers/node_modules/.bin/mcp-hub)
  --no-mcp-hub          skip the mcp-hub comparison
  --bin-dir DIR         where steward-under-test and fake-mcp-server are (default: next to this binary)
  --reload-ns A,B       server counts of the reload levels (default 1,10,100; quick 1,10)
  --cost-ns A,B         server counts of the cost levels (default 10,50,500; quick 10,50)
  --controller-arg ARG  an extra argument for `steward run` (repeatable; e.g. --ping-interval-ms=0)
  --cold-ns A,B         server counts of the readiness cold starts (default 10,100,500; quick 10)
  --init-delay-ms MS    initialize delay of the readiness fakes (default 300)
  --start-cpu-ms MS     CPU the readiness fakes burn at start (default 10)
  --out FILE            also write the JSON summary to FILE";

fn parse_opts() -> Result<Opts> {
    let exe = std::env::current_exe().context("locate this executable")?;
    let mut o = Opts {
        quick: false,
        only: SCENARIOS.iter().map(|s| (*s).to_owned()).collect(),
        observe: Observe::Watch,
        edits: 0,
        debounce_ms: 300,
        mcp_hub: None,
        no_mcp_hub: false,
        out: None,
        bin_dir: exe.parent().map(Path::to_path_buf).unwrap_or_default(),
        reload_ns: None,
        cost_ns: None,
        controller_args: Vec::new(),
        cold_ns: None,
        init_delay_ms: 300,
        start_cpu_ms: 10,
    };
    let ns = |v: String| -> Result<Vec<usize>> {
        v.split(',')
            .map(|x| x.trim().parse::<usize>().map_err(|e| anyhow!("{x:?}: {e}")))
            .filter(|n| !matches!(n, Ok(0)))
            .collect()
    };
    // `--name=value` is `--name value`.
    let mut args = std::env::args()
        .skip(1)
        .flat_map(|a| match a.split_once('=') {
            Some((name, value)) if name.starts_with("--") => {
                vec![name.to_owned(), value.to_owned()]
            }
            _ => vec![a],
        })
        .collect::<Vec<_>>()
        .into_iter();
    while let Some(a) = args.next() {
        let mut val = |name: &str| args.next().ok_or_else(|| anyhow!("{name} needs a value"));
        match a.as_str() {
            "--quick" => o.quick = true,
            "--only" => {
                let v = val("--only")?;
                o.only = v.split(',').map(|s| s.trim().to_owned()).collect();
                for s in &o.only {
                    if !SCENARIOS.contains(&s.as_str()) {
                        bail!("unknown scenario {s:?} (known: {})", SCENARIOS.join(", "));
                    }
                }
            }
            "--observe" => {
                o.observe = match val("--observe")?.as_str() {
                    "watch" => Observe::Watch,
                    "poll" => Observe::Poll,
                    other => bail!("--observe watch|poll, not {other:?}"),
                }
            }
            "--edits" => o.edits = val("--edits")?.parse().context("--edits")?,
            "--debounce-ms" => {
                o.debounce_ms = val("--debounce-ms")?.parse().context("--debounce-ms")?
            }
            "--mcp-hub" => o.mcp_hub = Some(val("--mcp-hub")?.into()),
            "--no-mcp-hub" => o.no_mcp_hub = true,
            "--out" => o.out = Some(val("--out")?.into()),
            "--bin-dir" => o.bin_dir = val("--bin-dir")?.into(),
            "--reload-ns" => o.reload_ns = Some(ns(val("--reload-ns")?)?),
            "--cost-ns" => o.cost_ns = Some(ns(val("--cost-ns")?)?),
            "--controller-arg" => o.controller_args.push(val("--controller-arg")?),
            "--cold-ns" => o.cold_ns = Some(ns(val("--cold-ns")?)?),
            "--init-delay-ms" => {
                o.init_delay_ms = val("--init-delay-ms")?.parse().context("--init-delay-ms")?
            }
            "--start-cpu-ms" => {
                o.start_cpu_ms = val("--start-cpu-ms")?.parse().context("--start-cpu-ms")?
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    if o.edits == 0 {
        o.edits = if o.quick { 4 } else { 24 };
    }
    if o.no_mcp_hub {
        o.only.remove("mcp-hub");
    }
    Ok(o)
}

/// Sizes of each scenario, full or quick.
#[derive(Debug, Clone)]
struct Plan {
    reload_ns: Vec<usize>,
    edits: usize,
    debounce_probes: usize,
    /// The reload level whose run also carries the debounce probes.
    probe_n: usize,
    burst_n: usize,
    burst_saves: usize,
    cold_n: usize,
    cold_repeats: usize,
    cost_ns: Vec<usize>,
    cost_edits: usize,
    /// Idle window used for the idle-CPU subtraction at each cost level.
    cost_idle: Duration,
    /// Edit windows are rounded up to a multiple of this (the ping period).
    cost_window_quantum: Option<Duration>,
    /// The cost level whose idle window is the reported idle CPU.
    idle_n: usize,
    idle_window: Duration,
    rss_n: usize,
    hub_n: usize,
    hub_edits: usize,
    hub_cold_repeats: usize,
}

impl Plan {
    fn new(o: &Opts) -> Plan {
        let mut plan = Plan::sized(o);
        if let Some(ns) = &o.reload_ns {
            plan.reload_ns = ns.clone();
        }
        if let Some(ns) = &o.cost_ns {
            plan.cost_ns = ns.clone();
        }
        plan
    }

    fn sized(o: &Opts) -> Plan {
        if o.quick {
            Plan {
                reload_ns: vec![1, 10],
                edits: o.edits,
                debounce_probes: 1,
                probe_n: 10,
                burst_n: 10,
                burst_saves: 200,
                cold_n: 10,
                cold_repeats: 1,
                cost_ns: vec![10, 50],
                cost_edits: 4,
                cost_idle: Duration::from_secs(1),
                cost_window_quantum: None,
                idle_n: 50,
                idle_window: Duration::from_secs(5),
                rss_n: 10,
                hub_n: 10,
                hub_edits: 3,
                hub_cold_repeats: 1,
            }
        } else {
            Plan {
                reload_ns: vec![1, 10, 100],
                edits: o.edits,
                debounce_probes: 5,
                probe_n: 10,
                burst_n: 10,
                burst_saves: 200,
                cold_n: 100,
                cold_repeats: 3,
                cost_ns: vec![10, 50, 500],
                cost_edits: 30,
                cost_idle: PING_PERIOD,
                cost_window_quantum: Some(PING_PERIOD),
                idle_n: 50,
                idle_window: Duration::from_secs(30),
                rss_n: 100,
                hub_n: 100,
                hub_edits: o.edits.max(20),
                hub_cold_repeats: 3,
            }
        }
    }
}

struct Ctx {
    opts: Opts,
    plan: Plan,
    steward: PathBuf,
    fake: PathBuf,
    debounce: Duration,
}

impl Ctx {
    /// The earliest time the next edit may be written after one written at `t0`.
    fn next_edit_at(&self, t0: Instant) -> Instant {
        t0 + self.debounce + SPACING_MARGIN
    }
}

// ---------------------------------------------------------------------------
// Cleanup registry: what to stop if the bench is interrupted.

#[derive(Debug, Clone)]
enum Live {
    /// A process we spawned; `group`: it leads its own process group.
    Proc { pid: i32, group: bool },
    /// A records dir: every fake that recorded a start there.
    Records(PathBuf),
    /// A temp dir to remove.
    Dir(PathBuf),
}

static LIVE: Mutex<Vec<(u64, Live)>> = Mutex::new(Vec::new());
static NEXT_ID: Mutex<u64> = Mutex::new(0);

fn register(l: Live) -> u64 {
    let mut n = NEXT_ID.lock().unwrap_or_else(|e| e.into_inner());
    *n += 1;
    let id = *n;
    LIVE.lock().unwrap_or_else(|e| e.into_inner()).push((id, l));
    id
}

fn unregister(id: u64) {
    LIVE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(i, _)| *i != id);
}

fn install_signal_cleanup() {
    let spawned = std::thread::Builder::new()
        .name("bench-signals".into())
        .spawn(|| {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                use tokio::signal::unix::{SignalKind, signal};
                let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
                    signal(SignalKind::terminate()),
                    signal(SignalKind::interrupt()),
                    signal(SignalKind::hangup()),
                ) else {
                    std::future::pending::<()>().await;
                    return;
                };
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                    _ = hup.recv() => {}
                }
            });
            eprintln!("steward-bench: interrupted; stopping every process it started");
            cleanup_all();
            std::process::exit(130);
        });
    if let Err(e) = spawned {
        eprintln!("steward-bench: no signal cleanup thread: {e}");
    }
}

fn cleanup_all() {
    let live: Vec<Live> = LIVE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain(..)
        .map(|(_, l)| l)
        .collect();
    let procs: Vec<(i32, bool)> = live
        .iter()
        .filter_map(|l| match l {
            Live::Proc { pid, group } => Some((*pid, *group)),
            _ => None,
        })
        .collect();
    for &(pid, group) in &procs {
        signal(if group { -pid } else { pid }, libc::SIGTERM);
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5)
        && procs.iter().any(|&(pid, _)| alive(pid as u32))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &(pid, group) in &procs {
        signal(if group { -pid } else { pid }, libc::SIGKILL);
    }
    for l in &live {
        if let Live::Records(dir) = l {
            kill_recorded_fakes(dir);
        }
    }
    for l in &live {
        if let Live::Dir(dir) = l {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// SIGKILL every fake that recorded a start in `dir` and still runs (its
/// command line is checked, so a reused pid is never hit). Returns how many.
fn kill_recorded_fakes(dir: &Path) -> usize {
    let mut killed = 0;
    for pid in steward_tests::harness::recorded_pids(dir) {
        if alive(pid) && is_fake(pid) {
            signal(pid as i32, libc::SIGKILL);
            killed += 1;
        }
    }
    killed
}

fn is_fake(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains("fake-mcp-server"))
        .unwrap_or(false)
}

/// A temp root (harness [`Env`]) whose fakes are killed when it drops.
struct Sandbox {
    env: Env,
    ids: Vec<u64>,
}

impl Sandbox {
    fn new() -> Sandbox {
        let env = Env::new();
        let ids = vec![
            register(Live::Dir(env.root.path().to_path_buf())),
            register(Live::Records(env.records())),
        ];
        Sandbox { env, ids }
    }

    /// Wait (bounded) until every recorded fake has exited; kill the rest.
    /// Returns how many had to be killed.
    fn reap_fakes(&self) -> usize {
        let dir = self.env.records();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if steward_tests::harness::recorded_pids(&dir)
                .into_iter()
                .all(|p| !alive(p) || !is_fake(p))
            {
                return 0;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        kill_recorded_fakes(&dir)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        kill_recorded_fakes(&self.env.records());
        for id in &self.ids {
            unregister(*id);
        }
    }
}

// ---------------------------------------------------------------------------
// /proc

fn clk_tck() -> u64 {
    #[allow(unsafe_code)]
    // SAFETY: sysconf reads a constant of the running system.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// utime + stime of the whole process, in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime is field 14, stime field 15.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Per-thread on-CPU time (ns) from /proc/<pid>/task/*/schedstat.
fn task_ns(pid: u32) -> BTreeMap<u32, u64> {
    let mut out = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(ns) = std::fs::read_to_string(e.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        {
            out.insert(tid, ns);
        }
    }
    out
}

fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[derive(Debug, Clone)]
struct CpuSample {
    at: Instant,
    ticks: u64,
    tasks: BTreeMap<u32, u64>,
}

fn cpu_sample(pid: u32) -> Result<CpuSample> {
    Ok(CpuSample {
        at: Instant::now(),
        ticks: cpu_ticks(pid).ok_or_else(|| anyhow!("read /proc/{pid}/stat"))?,
        tasks: task_ns(pid),
    })
}

#[derive(Debug, Clone, Copy)]
struct CpuDelta {
    wall_s: f64,
    /// From utime+stime (resolution: one clock tick).
    stat_ms: f64,
    /// From per-thread schedstat (ns; threads that exited inside the window
    /// are missing).
    sched_ms: f64,
    exited_threads: usize,
}

fn cpu_delta(a: &CpuSample, b: &CpuSample) -> CpuDelta {
    let tick_ms = 1000.0 / clk_tck() as f64;
    let mut ns: u64 = 0;
    for (tid, end) in &b.tasks {
        ns += end.saturating_sub(*a.tasks.get(tid).unwrap_or(&0));
    }
    CpuDelta {
        wall_s: (b.at - a.at).as_secs_f64(),
        stat_ms: (b.ticks.saturating_sub(a.ticks)) as f64 * tick_ms,
        sched_ms: ns as f64 / 1e6,
        exited_threads: a.tasks.keys().filter(|t| !b.tasks.contains_key(t)).count(),
    }
}

// ---------------------------------------------------------------------------
// Statistics and JSON helpers

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

#[derive(Debug, Clone, Copy)]
struct Summary {
    n: usize,
    p50: f64,
    p95: f64,
    max: f64,
}

fn summarize(values: &[f64]) -> Summary {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    Summary {
        n: v.len(),
        p50: pct(&v, 50.0),
        p95: pct(&v, 95.0),
        max: v.last().copied().unwrap_or(f64::NAN),
    }
}

fn summary_ms(values: &[f64]) -> Value {
    let s = summarize(values);
    json!({
        "n": s.n,
        "p50Ms": r1(s.p50),
        "p95Ms": r1(s.p95),
        "maxMs": r1(s.max),
    })
}

/// Several teardown reports as one.
fn teardowns(all: &[Value]) -> Value {
    json!({
        "runs": all.len(),
        "allExitedCleanly": all.iter().all(|t| {
            t["controllerExitedCleanly"].as_bool().or(t["exitedCleanly"].as_bool()) == Some(true)
        }),
        "fakesLeftRunningAndKilled": all
            .iter()
            .map(|t| t["fakesLeftRunningAndKilled"].as_u64().unwrap_or(0))
            .sum::<u64>(),
    })
}

fn mb(kb: Option<u64>) -> Value {
    kb.map_or(Value::Null, |k| json!(r1(k as f64 / 1024.0)))
}

fn progress(msg: impl AsRef<str>) {
    eprintln!("[steward-bench] {}", msg.as_ref());
}

// ---------------------------------------------------------------------------
// The fleet of fake servers and its settings file

struct Fleet {
    fake: PathBuf,
    records: PathBuf,
    names: Vec<String>,
    /// Extra env per server (the edits).
    extra: Vec<BTreeMap<String, String>>,
    /// Each server's fake config (name and record file are set from the fleet).
    configs: Vec<FakeMcpConfig>,
    /// Servers whose config goes in `args` (`--config=<json>`) rather than env.
    config_in_args: BTreeSet<usize>,
    /// `mcp.excluded` of the settings file.
    excluded: BTreeSet<String>,
}

impl Fleet {
    /// `n` servers, each a fake with config `base`.
    fn with(fake: &Path, records: &Path, n: usize, base: &FakeMcpConfig) -> Fleet {
        let width = n.saturating_sub(1).to_string().len().max(3);
        let mut fleet = Fleet {
            fake: fake.to_path_buf(),
            records: records.to_path_buf(),
            names: Vec::new(),
            extra: Vec::new(),
            configs: Vec::new(),
            config_in_args: BTreeSet::new(),
            excluded: BTreeSet::new(),
        };
        for i in 0..n {
            fleet.push(&format!("s{i:0width$}"), base);
        }
        fleet
    }

    /// Add a server named `name` with config `base`; returns its index.
    fn push(&mut self, name: &str, base: &FakeMcpConfig) -> usize {
        self.names.push(name.to_owned());
        self.extra.push(BTreeMap::new());
        self.configs.push(FakeMcpConfig {
            name: name.to_owned(),
            record: Some(self.records.join(format!("{name}.jsonl"))),
            ..base.clone()
        });
        self.names.len() - 1
    }

    fn len(&self) -> usize {
        self.names.len()
    }

    fn record(&self, i: usize) -> PathBuf {
        self.records.join(format!("{}.jsonl", self.names[i]))
    }

    fn env_of(&self, i: usize) -> BTreeMap<String, String> {
        let mut env = self.extra[i].clone();
        if !self.config_in_args.contains(&i) {
            env.insert(fake_mcp::CONFIG_ENV.to_owned(), self.configs[i].to_json());
        }
        env
    }

    fn entry(&self, i: usize, reordered: bool) -> String {
        let mut cmd = serde_json::to_string(&self.fake.to_string_lossy()).unwrap_or_default();
        if self.config_in_args.contains(&i) {
            let arg = format!("--config={}", self.configs[i].to_json());
            cmd = format!("{cmd}, \"args\": {}", json!([arg]));
        }
        let env = self.env_of(i);
        if reordered {
            // Same meaning: keys of the entry and of env in another order.
            let env: Vec<String> = env
                .iter()
                .rev()
                .map(|(k, v)| format!("{}: {}", json!(k), json!(v)))
                .collect();
            format!(
                "{{ \"env\": {{ {} }},\n      \"command\": {cmd} }}",
                env.join(", ")
            )
        } else {
            format!("{{\"command\":{cmd},\"env\":{}}}", json!(env))
        }
    }

    /// `{"mcpServers": {...}}`; `reordered`: servers in reverse order, keys
    /// reordered, other whitespace — the same configuration.
    fn content(&self, reordered: bool) -> String {
        let mut items: Vec<String> = (0..self.len())
            .map(|i| format!("{}: {}", json!(self.names[i]), self.entry(i, reordered)))
            .collect();
        if reordered {
            items.reverse();
            format!(
                "{{\n  \"mcpServers\": {{\n    {}\n  }}{}\n}}\n",
                items.join(",\n    "),
                self.excluded_json()
            )
        } else {
            format!(
                "{{\"mcpServers\":{{{}}}{}}}",
                items.join(","),
                self.excluded_json()
            )
        }
    }

    /// `,"mcp":{"excluded":[...]}` when some server is excluded.
    fn excluded_json(&self) -> String {
        if self.excluded.is_empty() {
            String::new()
        } else {
            format!(",\"mcp\":{}", json!({ "excluded": self.excluded }))
        }
    }

    fn set(&mut self, i: usize, key: &str, value: &str) {
        self.extra[i].insert(key.to_owned(), value.to_owned());
    }

    /// Pids of the "start" events of server `i`, in order.
    fn starts_of(&self, i: usize) -> Vec<u32> {
        read_record(&self.record(i))
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.event == "start")
            .map(|e| e.pid)
            .collect()
    }

    fn start_counts(&self) -> Vec<usize> {
        (0..self.len()).map(|i| self.starts_of(i).len()).collect()
    }

    /// The server a stream of edits hits at step `k` (spread over the fleet).
    fn target(&self, k: usize) -> usize {
        (k * 7 + 3) % self.len()
    }
}

/// Write `content` to `path` by rename; returns the instant right before
/// the rename (the clock start of an edit).
fn write_by_rename(path: &Path, content: &str, seq: u64) -> Result<Instant> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_file_name(format!(
        ".{}.bench{seq}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy()
    ));
    std::fs::write(&tmp, content).with_context(|| format!("write {}", tmp.display()))?;
    let t0 = Instant::now();
    std::fs::rename(&tmp, path).with_context(|| format!("rename onto {}", path.display()))?;
    Ok(t0)
}

/// Per-edit churn accounting from the record files.
struct Churn {
    counts: Vec<usize>,
    /// Restarts of servers that were not the edit's target.
    unchanged_restarts: usize,
    /// Which servers restarted without being edited.
    offenders: BTreeSet<String>,
    target_restarts: Vec<usize>,
}

impl Churn {
    fn new(fleet: &Fleet) -> Churn {
        Churn {
            counts: fleet.start_counts(),
            unchanged_restarts: 0,
            offenders: BTreeSet::new(),
            target_restarts: Vec::new(),
        }
    }

    /// Close the window of an edit that targeted `targets`.
    fn close(&mut self, fleet: &Fleet, targets: &[usize]) {
        let now = fleet.start_counts();
        let mut target = 0;
        for (i, (&a, &b)) in self.counts.iter().zip(&now).enumerate() {
            let d = b.saturating_sub(a);
            if targets.contains(&i) {
                target += d;
            } else if d > 0 {
                self.unchanged_restarts += d;
                self.offenders.insert(fleet.names[i].clone());
            }
        }
        self.target_restarts.push(target);
        self.counts = now;
    }

    fn json(&self) -> Value {
        json!({
            "unchangedRestarts": self.unchanged_restarts,
            "unchangedRestarted": self.offenders,
            "editedServerRestarts": self.target_restarts.iter().sum::<usize>(),
            "editsWithoutARestartOfTheEditedServer":
                self.target_restarts.iter().filter(|r| **r == 0).count(),
        })
    }
}

// ---------------------------------------------------------------------------
// The steward controller

fn base_env() -> Vec<(String, String)> {
    ["PATH", "LANG", "TMPDIR"]
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
        .collect()
}

struct Stw {
    child: Option<Child>,
    pid: u32,
    socket: PathBuf,
    log: PathBuf,
    spawned: Instant,
    reg: u64,
}

impl Stw {
    fn spawn(ctx: &Ctx, env: &Env, extra: &[String]) -> Result<Stw> {
        let log = env.root.path().join("controller.log");
        let log_file = std::fs::File::create(&log)?;
        let mut vars = env.vars();
        // The product default filter ("info,rmcp=warn").
        vars.remove("RUST_LOG");
        let mut cmd = Command::new(&ctx.steward);
        cmd.arg("--workspace")
            .arg(&env.ws)
            .arg("run")
            .args(["--debounce-ms", &ctx.opts.debounce_ms.to_string()])
            .args(&ctx.opts.controller_args)
            .args(extra)
            .env_clear()
            .envs(base_env())
            .envs(vars)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file);
        let spawned = Instant::now();
        let child = cmd.spawn().context("spawn steward-under-test run")?;
        let pid = child.id();
        let reg = register(Live::Proc {
            pid: pid as i32,
            group: false,
        });
        Ok(Stw {
            child: Some(child),
            pid,
            socket: env.paths().socket_path(),
            log,
            spawned,
            reg,
        })
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    fn check_running(&mut self) -> Result<()> {
        if let Some(Ok(Some(code))) = self.child.as_mut().map(Child::try_wait) {
            bail!("the controller exited with {code}:\n{}", self.log_tail());
        }
        Ok(())
    }

    /// Open the status observer, retrying until the socket answers.
    fn observe(&mut self, how: Observe) -> Result<Observer> {
        let start = Instant::now();
        loop {
            self.check_running()?;
            let attempt = match how {
                Observe::Watch => StatusStream::open(&self.socket).map(Observer::Watch),
                Observe::Poll => Poller::new(&self.socket).map(Observer::Poll),
            };
            match attempt {
                Ok(o) => return Ok(o),
                Err(e) if start.elapsed() > DEADLINE => {
                    bail!(
                        "the control socket did not answer: {e}\n{}",
                        self.log_tail()
                    )
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    }

    /// One `status` request (outside any timed region).
    fn status(&self) -> Result<WorkspaceStatus> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let r = rt.block_on(control::request(
            &self.socket,
            &Request::Status,
            Duration::from_secs(10),
        ))?;
        r.status
            .map(|s| *s)
            .ok_or_else(|| anyhow!("no status in the answer: {:?}", r.error))
    }

    fn log_count(&self, needle: &str, from: usize) -> usize {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.get(from..)
            .unwrap_or("")
            .lines()
            .filter(|l| l.contains(needle))
            .count()
    }

    fn log_len(&self) -> usize {
        std::fs::metadata(&self.log)
            .map(|m| m.len() as usize)
            .unwrap_or(0)
    }

    /// SIGTERM, wait (bounded), SIGKILL. Returns whether it exited cleanly.
    fn terminate(&mut self) -> Option<bool> {
        let mut child = self.child.take()?;
        signal(child.id() as i32, libc::SIGTERM);
        let start = Instant::now();
        let mut clean = None;
        while start.elapsed() < DEADLINE {
            if let Ok(Some(status)) = child.try_wait() {
                clean = Some(status.success());
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if clean.is_none() {
            let _ = child.kill();
            let _ = child.wait();
            clean = Some(false);
        }
        unregister(self.reg);
        clean
    }
}

impl Drop for Stw {
    fn drop(&mut self) {
        self.terminate();
    }
}

// ---------------------------------------------------------------------------
// Observing the status: the watch stream or polling

/// The control socket's `watch` stream, read on its own thread and
/// timestamped on receipt of each line.
struct StatusStream {
    rx: mpsc::Receiver<(Instant, Result<WorkspaceStatus, String>)>,
    stream: UnixStream,
}

impl StatusStream {
    fn open(socket: &Path) -> Result<StatusStream> {
        let mut stream = UnixStream::connect(socket)?;
        let mut line = serde_json::to_vec(&Request::Watch)?;
        line.push(b'\n');
        stream.write_all(&line)?;
        let reader = stream.try_clone()?;
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("bench-watch".into())
            .spawn(move || {
                let mut r = BufReader::new(reader);
                let mut line = String::new();
                loop {
                    line.clear();
                    match r.read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    let t = Instant::now();
                    let doc = serde_json::from_str::<Response>(&line)
                        .map_err(|e| e.to_string())
                        .and_then(|r| {
                            r.status.map(|s| *s).ok_or_else(|| {
                                r.error.unwrap_or_else(|| "a line without status".into())
                            })
                        });
                    if tx.send((t, doc)).is_err() {
                        return;
                    }
                }
            })?;
        Ok(StatusStream { rx, stream })
    }
}

impl Drop for StatusStream {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// `status` every 2 ms through `steward::control::request`.
struct Poller {
    socket: PathBuf,
    rt: tokio::runtime::Runtime,
    every: Duration,
    next_at: Instant,
}

impl Poller {
    fn new(socket: &Path) -> Result<Poller> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(control::request(
            socket,
            &Request::Status,
            Duration::from_secs(5),
        ))?;
        Ok(Poller {
            socket: socket.to_path_buf(),
            rt,
            every: Duration::from_millis(2),
            next_at: Instant::now(),
        })
    }
}

enum Observer {
    Watch(StatusStream),
    Poll(Poller),
}

impl Observer {
    /// The next status document and when it was received; `None` at the deadline.
    fn next(&mut self, deadline: Instant) -> Result<Option<(Instant, WorkspaceStatus)>> {
        match self {
            Observer::Watch(w) => {
                let wait = deadline.saturating_duration_since(Instant::now());
                match w.rx.recv_timeout(wait) {
                    Ok((t, Ok(s))) => Ok(Some((t, s))),
                    Ok((_, Err(e))) => bail!("watch stream: {e}"),
                    Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        bail!("the watch stream closed")
                    }
                }
            }
            Observer::Poll(p) => {
                let now = Instant::now();
                if now >= deadline {
                    return Ok(None);
                }
                if p.next_at > now {
                    // The sampling interval of the poller, not a stand-in for a condition.
                    std::thread::sleep(p.next_at - now);
                }
                p.next_at = Instant::now() + p.every;
                let r = p.rt.block_on(control::request(
                    &p.socket,
                    &Request::Status,
                    Duration::from_secs(5),
                ))?;
                let t = Instant::now();
                Ok(r.status.map(|s| (t, *s)))
            }
        }
    }

    /// Feed documents to `f` until it returns true; returns that document's time.
    fn wait(
        &mut self,
        what: &str,
        f: impl FnMut(Instant, &WorkspaceStatus) -> bool,
    ) -> Result<(Instant, WorkspaceStatus)> {
        self.wait_for(what, DEADLINE, f)
    }

    /// [`Self::wait`] with a bound of `limit`.
    fn wait_for(
        &mut self,
        what: &str,
        limit: Duration,
        mut f: impl FnMut(Instant, &WorkspaceStatus) -> bool,
    ) -> Result<(Instant, WorkspaceStatus)> {
        let deadline = Instant::now() + limit;
        let mut last = None;
        while let Some((t, s)) = self.next(deadline)? {
            if f(t, &s) {
                return Ok((t, s));
            }
            last = Some(s);
        }
        let brief = last.map(|s| {
            s.items
                .iter()
                .filter_map(|i| match i {
                    Item::McpServer(m) if !fresh_ready(m) => Some(format!(
                        "{}={:?}/{:?}",
                        m.metadata.name, m.status.phase, m.status.reason
                    )),
                    _ => None,
                })
                .take(10)
                .collect::<Vec<_>>()
        });
        bail!("timed out after {limit:?} waiting for {what}; not ready: {brief:?}")
    }
}

fn mcp<'a>(s: &'a WorkspaceStatus, name: &str) -> Option<&'a McpServer> {
    s.items.iter().find_map(|i| match i {
        Item::McpServer(m) if m.metadata.name == name => Some(m),
        _ => None,
    })
}

/// `Ready` with the desired configuration observed.
fn fresh_ready(m: &McpServer) -> bool {
    m.status.phase == Phase::Ready
        && m.status.observed_hash.as_deref() == Some(m.spec.config_hash.as_str())
}

fn spec_env<'a>(m: &'a McpServer, key: &str) -> Option<&'a str> {
    m.spec.env.as_ref()?.get(key).map(String::as_str)
}

fn all_ready(s: &WorkspaceStatus, fleet: &Fleet) -> bool {
    let ready = s
        .items
        .iter()
        .filter(|i| matches!(i, Item::McpServer(m) if fresh_ready(m)))
        .count();
    ready == fleet.len()
}

fn pids(s: &WorkspaceStatus) -> BTreeMap<String, Option<u32>> {
    s.items
        .iter()
        .filter_map(|i| match i {
            Item::McpServer(m) => Some((m.metadata.name.clone(), m.status.pid)),
            _ => None,
        })
        .collect()
}

/// One timed edit of server `idx` to `EDIT_KEY = value`, observed through the socket.
#[derive(Debug, Clone, Copy)]
struct EditSample {
    t0: Instant,
    /// write → the new spec visible in the status (detect + debounce + parse + apply).
    applied_ms: f64,
    /// write → Ready with the new hash and a new pid (`None`: not waited for).
    ready_ms: Option<f64>,
    /// write → first `Stopping` / `Starting` seen (if a document showed it).
    stopping_ms: Option<f64>,
    starting_ms: Option<f64>,
    /// Unchanged servers whose pid changed in the status during the edit.
    pid_changes: usize,
}

/// Write the edit and wait until it is applied (and, with `wait_ready`,
/// until the server is Ready with it under a new pid).
#[allow(clippy::too_many_arguments)]
fn steward_edit(
    obs: &mut Observer,
    fleet: &mut Fleet,
    settings: &Path,
    idx: usize,
    value: &str,
    seq: u64,
    baseline: &mut BTreeMap<String, Option<u32>>,
    wait_ready: bool,
) -> Result<EditSample> {
    let name = fleet.names[idx].clone();
    let old_pid = baseline.get(&name).copied().flatten();
    fleet.set(idx, EDIT_KEY, value);
    let content = fleet.content(false);
    let t0 = write_by_rename(settings, &content, seq)?;
    let (mut applied, mut stopping, mut starting) = (None, None, None);
    let mut changed_others = BTreeSet::new();
    let what = format!("{name} with {EDIT_KEY}={value} (ready: {wait_ready})");
    let (t, last) = obs.wait(&what, |t, s| {
        let Some(m) = mcp(s, &name) else {
            return false;
        };
        let is_applied = spec_env(m, EDIT_KEY) == Some(value);
        if is_applied && applied.is_none() {
            applied = Some(t);
        }
        if applied.is_some() {
            match m.status.phase {
                Phase::Stopping if stopping.is_none() => stopping = Some(t),
                Phase::Starting if starting.is_none() => starting = Some(t),
                _ => {}
            }
        }
        for (other, pid) in pids(s) {
            let before = baseline.get(&other).copied().flatten();
            if other != name && pid.is_some() && before.is_some() && before != pid {
                changed_others.insert(other);
            }
        }
        is_applied && (!wait_ready || (fresh_ready(m) && m.status.pid != old_pid))
    })?;
    let applied = applied.unwrap_or(t);
    for (k, v) in pids(&last) {
        if k != name || wait_ready {
            baseline.insert(k, v);
        }
    }
    Ok(EditSample {
        t0,
        applied_ms: ms(applied - t0),
        ready_ms: wait_ready.then(|| ms(t - t0)),
        stopping_ms: stopping.map(|x: Instant| ms(x - t0)),
        starting_ms: starting.map(|x: Instant| ms(x - t0)),
        pid_changes: changed_others.len(),
    })
}

/// Sleep until `at` (the deliberate spacing between edits).
fn sleep_until(at: Instant) {
    let now = Instant::now();
    if at > now {
        std::thread::sleep(at - now);
    }
}

/// Start a controller on a fresh sandbox with `n` fake servers in user
/// settings and wait until all are Ready. Returns the time to all Ready.
struct Running {
    sb: Sandbox,
    fleet: Fleet,
    settings: PathBuf,
    stw: Stw,
    obs: Option<Observer>,
    baseline: BTreeMap<String, Option<u32>>,
    /// Controller spawn → its socket answered (with a client from the start).
    socket_ms: Option<f64>,
    /// Controller spawn → every server Ready (as observed).
    cold_ms: f64,
}

/// With `client`, the status is observed from the start (`--observe`); without,
/// no socket client exists until every fake has answered `tools/list` (read
/// from the record files), then `status` is polled every 2 ms until all are
/// Ready and the poller is closed.
fn start_steward(ctx: &Ctx, n: usize, client: bool) -> Result<Running> {
    start_steward_with(ctx, n, client, &FakeMcpConfig::default(), &[])
}

/// [`start_steward`] with fakes of config `base` and `extra` arguments to
/// `steward run`.
fn start_steward_with(
    ctx: &Ctx,
    n: usize,
    client: bool,
    base: &FakeMcpConfig,
    extra: &[String],
) -> Result<Running> {
    let sb = Sandbox::new();
    let settings = sb.env.home.join("settings.json");
    let fleet = Fleet::with(&ctx.fake, &sb.env.records(), n, base);
    write_by_rename(&settings, &fleet.content(false), 0)?;
    let mut stw = Stw::spawn(ctx, &sb.env, extra)?;
    progress(format!("  controller pid {} ({n} servers)", stw.pid));
    let (mut obs, socket_ms) = if client {
        let obs = stw.observe(ctx.opts.observe)?;
        (obs, Some(ms(stw.spawned.elapsed())))
    } else {
        wait_all_listed(&fleet, &mut stw)?;
        (stw.observe(Observe::Poll)?, None)
    };
    let (t, s) = obs.wait_for(&format!("{n} servers Ready"), deadline_for(n), |_, s| {
        all_ready(s, &fleet)
    })?;
    Ok(Running {
        cold_ms: ms(t - stw.spawned),
        socket_ms,
        baseline: pids(&s),
        obs: client.then_some(obs),
        sb,
        fleet,
        settings,
        stw,
    })
}

/// The bound on a wait for `n` servers to start.
fn deadline_for(n: usize) -> Duration {
    DEADLINE + Duration::from_millis(100) * n as u32
}

/// How often the record files of `n` fakes (or a status of `n` servers) are
/// read while waiting for a start: 5 ms, longer for large fleets so that the
/// bench's own reading stays a small share of the 2-core machine.
fn sweep_interval(n: usize) -> Duration {
    Duration::from_micros(100 * n as u64).max(Duration::from_millis(5))
}

/// Wait (reading the record files every 5 ms; free for the controller)
/// until every fake of `fleet` has answered `tools/list`.
fn wait_all_listed(fleet: &Fleet, stw: &mut Stw) -> Result<Instant> {
    let mut pending: Vec<usize> = (0..fleet.len()).collect();
    let limit = deadline_for(fleet.len());
    let deadline = Instant::now() + limit;
    loop {
        stw.check_running()?;
        pending.retain(|&i| {
            let ev = read_record(&fleet.record(i)).unwrap_or_default();
            !ev.iter()
                .any(|e| e.event == "start" && answered_tools_list(&ev, e.pid))
        });
        if pending.is_empty() {
            return Ok(Instant::now());
        }
        if Instant::now() > deadline {
            bail!(
                "{} servers did not list tools within {limit:?}",
                pending.len()
            );
        }
        std::thread::sleep(sweep_interval(fleet.len()));
    }
}

impl Running {
    fn obs(&mut self) -> Result<&mut Observer> {
        self.obs.as_mut().ok_or_else(|| anyhow!("no observer"))
    }

    /// Stop the controller and check that its fakes are gone.
    fn finish(mut self) -> Value {
        self.obs = None;
        let clean = self.stw.terminate();
        let killed = self.sb.reap_fakes();
        json!({ "controllerExitedCleanly": clean, "fakesLeftRunningAndKilled": killed })
    }
}

// ---------------------------------------------------------------------------
// Scenario: reload latency, churn, debounce, reorder-only edit

struct ReloadLevel {
    n: usize,
    json: Value,
    ready: Vec<f64>,
    applied: Vec<f64>,
    unchanged_restarts: usize,
    hwm_kb: Option<u64>,
}

fn reload_level(ctx: &Ctx, n: usize, probes: usize) -> Result<ReloadLevel> {
    progress(format!("reload: {n} servers, {} edits", ctx.plan.edits));
    let mut r = start_steward(ctx, n, true)?;
    let cold_ms = r.cold_ms;
    let pid = r.stw.pid;
    let mut churn = Churn::new(&r.fleet);
    let mut seq = 1u64;
    let cpu_a = cpu_sample(pid)?;
    let mut samples: Vec<EditSample> = Vec::new();
    for k in 0..ctx.plan.edits {
        let idx = r.fleet.target(k);
        let (fleet, settings) = (&mut r.fleet, r.settings.clone());
        let obs = r.obs.as_mut().ok_or_else(|| anyhow!("no observer"))?;
        let s = steward_edit(
            obs,
            fleet,
            &settings,
            idx,
            &format!("e{k}"),
            seq,
            &mut r.baseline,
            true,
        )?;
        seq += 1;
        churn.close(&r.fleet, &[idx]);
        sleep_until(ctx.next_edit_at(s.t0));
        samples.push(s);
    }
    let cpu_b = cpu_sample(pid)?;
    let cpu = cpu_delta(&cpu_a, &cpu_b);

    // Debounce probes: a second write while the first is settling is a
    // trailing edge; its apply latency minus a leading edge's is the window.
    let (mut trailing, mut gaps) = (Vec::new(), Vec::new());
    for p in 0..probes {
        let idx = r.fleet.target(1000 + p);
        let settings = r.settings.clone();
        let obs = r.obs.as_mut().ok_or_else(|| anyhow!("no observer"))?;
        let a = steward_edit(
            obs,
            &mut r.fleet,
            &settings,
            idx,
            &format!("pa{p}"),
            seq,
            &mut r.baseline,
            false,
        )?;
        let b = steward_edit(
            obs,
            &mut r.fleet,
            &settings,
            idx,
            &format!("pb{p}"),
            seq + 1,
            &mut r.baseline,
            true,
        )?;
        seq += 2;
        trailing.push(b.applied_ms);
        gaps.push(ms(b.t0 - a.t0));
        churn.close(&r.fleet, &[idx]);
        sleep_until(ctx.next_edit_at(b.t0));
    }

    // A key-reorder/whitespace-only rewrite, then a sentinel edit (proof that
    // the reorder was processed before we count).
    let mut reorder = Churn::new(&r.fleet);
    let t_r = write_by_rename(&r.settings, &r.fleet.content(true), seq)?;
    seq += 1;
    sleep_until(ctx.next_edit_at(t_r));
    let sentinel = r.fleet.target(2000);
    let settings = r.settings.clone();
    let obs = r.obs.as_mut().ok_or_else(|| anyhow!("no observer"))?;
    let s = steward_edit(
        obs,
        &mut r.fleet,
        &settings,
        sentinel,
        "sentinel",
        seq,
        &mut r.baseline,
        true,
    )?;
    sleep_until(ctx.next_edit_at(s.t0));
    reorder.close(&r.fleet, &[sentinel]);
    churn.close(&r.fleet, &[sentinel]);

    let status = r.stw.status()?;
    let all_ok = all_ready(&status, &r.fleet);
    let hwm = status_kb(pid, "VmHWM:");
    let rss = status_kb(pid, "VmRSS:");
    let total_ticks = cpu_ticks(pid);
    let ready: Vec<f64> = samples.iter().filter_map(|s| s.ready_ms).collect();
    let applied: Vec<f64> = samples.iter().map(|s| s.applied_ms).collect();
    let apply_to_ready: Vec<f64> = samples
        .iter()
        .filter_map(|s| Some(s.ready_ms? - s.applied_ms))
        .collect();
    let stop_seen: Vec<f64> = samples.iter().filter_map(|s| s.stopping_ms).collect();
    let start_seen: Vec<f64> = samples.iter().filter_map(|s| s.starting_ms).collect();
    let trailing_edits = applied
        .iter()
        .filter(|a| **a > ms(ctx.debounce) / 2.0)
        .count();
    let pid_changes: usize = samples.iter().map(|s| s.pid_changes).sum();
    let mut json = json!({
        "servers": n,
        "edits": samples.len(),
        "coldStartMs": r1(cold_ms),
        "latencyWriteToReady": summary_ms(&ready),
        "latencyWriteToSpecApplied": summary_ms(&applied),
        "latencySpecAppliedToReady": summary_ms(&apply_to_ready),
        "writeToStoppingSeen": summary_ms(&stop_seen),
        "writeToStartingSeen": summary_ms(&start_seen),
        "editsAppliedAsTrailingEdge": trailing_edits,
        "churn": churn.json(),
        "unchangedPidChangesSeenInStatus": pid_changes,
        "reorderOnlyEdit": {
            "unchangedRestarts": reorder.unchanged_restarts,
            "unchangedRestarted": reorder.offenders,
            "sentinelRestarts": reorder.target_restarts.first().copied().unwrap_or(0),
        },
        "allReadyAtEnd": all_ok,
        "controller": {
            "cpuMsPerEditStat": r1(cpu.stat_ms / samples.len().max(1) as f64),
            "cpuMsPerEditSchedstat": r1(cpu.sched_ms / samples.len().max(1) as f64),
            "cpuTotalS": total_ticks.map(|t| r3(t as f64 / clk_tck() as f64)),
            "peakRssMb": mb(hwm),
            "rssMb": mb(rss),
        },
    });
    if probes > 0 {
        let leading = summarize(&applied).p50;
        let trail = summarize(&trailing).p50;
        json["debounce"] = json!({
            "configuredMs": ctx.opts.debounce_ms,
            "probes": probes,
            "leadingEdgeWriteToApplied": summary_ms(&applied),
            "trailingEdgeWriteToApplied": summary_ms(&trailing),
            "secondWriteAfterFirst": summary_ms(&gaps),
            "measuredWindowMs": r1(trail - leading),
            "how": "a second write to the same server right after the first one was applied \
                    (inside the window) is applied only when the file has been quiet for the \
                    window; window = p50(trailing write→applied) - p50(leading write→applied)",
        });
    }
    let unchanged = churn.unchanged_restarts;
    json["teardown"] = r.finish();
    Ok(ReloadLevel {
        n,
        json,
        ready,
        applied,
        unchanged_restarts: unchanged,
        hwm_kb: hwm,
    })
}

// ---------------------------------------------------------------------------
// Scenario: a burst of saves to one server

struct Burst {
    json: Value,
    restarts: usize,
    unchanged: usize,
}

fn burst(ctx: &Ctx) -> Result<Burst> {
    let (n, saves) = (ctx.plan.burst_n, ctx.plan.burst_saves);
    progress(format!("burst: {saves} saves to one of {n} servers"));
    let mut r = start_steward(ctx, n, true)?;
    let idx = r.fleet.target(0);
    let name = r.fleet.names[idx].clone();
    let old_pid = r.baseline.get(&name).copied().flatten();
    let before = r.fleet.start_counts();
    let log_from = r.stw.log_len();
    let key = "BENCH_BURST";
    let mut first = None;
    let mut last = Instant::now();
    for i in 0..saves {
        r.fleet.set(idx, key, &i.to_string());
        let t = write_by_rename(&r.settings, &r.fleet.content(false), i as u64)?;
        first.get_or_insert(t);
        last = t;
    }
    let first = first.unwrap_or(last);
    let final_value = (saves - 1).to_string();
    let (t_done, _) = r
        .obs()?
        .wait(&format!("{name} Ready with the last save"), |_, s| {
            mcp(s, &name).is_some_and(|m| {
                spec_env(m, key) == Some(final_value.as_str())
                    && fresh_ready(m)
                    && m.status.pid != old_pid
            })
        })?;
    // A deliberate observation window: anything still coming would show.
    sleep_until(ctx.next_edit_at(last).max(t_done) + ctx.debounce);
    let after = r.fleet.start_counts();
    let restarts = after[idx] - before[idx];
    let unchanged: usize = (0..n)
        .filter(|i| *i != idx)
        .map(|i| after[i] - before[i])
        .sum();
    let applies = r.stw.log_count("source changed", log_from);
    let reloads = r.stw.log_count("reload finished", log_from);
    let json = json!({
        "servers": n,
        "saves": saves,
        "burstWriteMs": r1(ms(last - first)),
        "editedServerRestarts": restarts,
        "unchangedRestarts": unchanged,
        "fileChangesApplied": applies,
        "reloadsFinished": reloads,
        "lastWriteToReadyMs": r1(ms(t_done - last)),
        "teardown": r.finish(),
    });
    Ok(Burst {
        json,
        restarts,
        unchanged,
    })
}

// ---------------------------------------------------------------------------
// Scenario: cold start

struct Cold {
    json: Value,
    /// Without a socket client during the start (the method used for mcp-hub).
    all_ready: Vec<f64>,
    with_watch: Vec<f64>,
    hwm_kb: Vec<u64>,
}

fn cold(ctx: &Ctx) -> Result<Cold> {
    let n = ctx.plan.cold_n;
    let (mut all_ready_ms, mut socket, mut hwm, mut teardown) = (vec![], vec![], vec![], vec![]);
    let mut watched = vec![];
    for rep in 0..ctx.plan.cold_repeats {
        progress(format!(
            "cold start: {n} servers (run {}, no client)",
            rep + 1
        ));
        let r = start_steward(ctx, n, false)?;
        all_ready_ms.push(r.cold_ms);
        if let Some(k) = status_kb(r.stw.pid, "VmHWM:") {
            hwm.push(k);
        }
        teardown.push(r.finish());
        progress(format!(
            "cold start: {n} servers (run {}, watched)",
            rep + 1
        ));
        let r = start_steward(ctx, n, true)?;
        watched.push(r.cold_ms);
        socket.extend(r.socket_ms);
        if let Some(k) = status_kb(r.stw.pid, "VmHWM:") {
            hwm.push(k);
        }
        teardown.push(r.finish());
    }
    Ok(Cold {
        json: json!({
            "servers": n,
            "runs": all_ready_ms.len(),
            "spawnToAllReady": summary_ms(&all_ready_ms),
            "spawnToAllReadyHow": "no socket client until every fake's record file shows tools/list \
                                   answered, then a status request every 2 ms until all are Ready \
                                   (the method used for mcp-hub)",
            "spawnToAllReadyWithWatchClient": summary_ms(&watched),
            "spawnToSocketAnswers": summary_ms(&socket),
            "peakRssAfterColdStartMb": hwm.iter().map(|k| mb(Some(*k))).collect::<Vec<_>>(),
            "teardown": teardowns(&teardown),
        }),
        all_ready: all_ready_ms,
        with_watch: watched,
        hwm_kb: hwm,
    })
}

// ---------------------------------------------------------------------------
// Scenario: controller cost (CPU per edit, idle CPU)

/// Whether fake `pid` answered a `tools/list` (the controller's handshake is done or nearly).
fn answered_tools_list(events: &[fake_mcp::RecordEvent], pid: u32) -> bool {
    let ids: Vec<&Value> = events
        .iter()
        .filter(|e| e.pid == pid && e.event == "recv" && e.method() == Some("tools/list"))
        .filter_map(|e| e.message.get("id"))
        .collect();
    events.iter().any(|e| {
        e.pid == pid
            && e.event == "send"
            && e.message.get("result").is_some()
            && e.message.get("id").is_some_and(|id| ids.contains(&id))
    })
}

/// Wait (polling the record file every ms) until server `idx` runs a
/// process that is not in `prev` and has answered `tools/list`. Returns when
/// the new process was first seen, and when it had answered.
fn wait_new_process(
    fleet: &Fleet,
    idx: usize,
    prev: &[u32],
    listed: bool,
) -> Result<(Instant, Instant)> {
    let deadline = Instant::now() + DEADLINE;
    let mut seen = None;
    while Instant::now() < deadline {
        let events = read_record(&fleet.record(idx)).unwrap_or_default();
        let new = events
            .iter()
            .find(|e| e.event == "start" && !prev.contains(&e.pid))
            .map(|e| e.pid);
        if let Some(pid) = new {
            let now = Instant::now();
            let first = *seen.get_or_insert(now);
            if !listed || answered_tools_list(&events, pid) {
                return Ok((first, now));
            }
        }
        // The polling interval of the record file (a free read for the controller).
        std::thread::sleep(Duration::from_millis(1));
    }
    bail!("{} was not restarted within {DEADLINE:?}", fleet.names[idx])
}

struct CostLevel {
    n: usize,
    json: Value,
    per_edit_stat_ms: f64,
    per_edit_net_ms: f64,
    per_edit_sched_ms: f64,
    /// Schedstat (ns) when no thread exited in the windows, else stat (ticks).
    per_edit_best_ms: f64,
    /// The same, less the idle rate over the edit window (the edit's own work).
    per_edit_best_net_ms: f64,
    idle_pct_best: f64,
    best_source: &'static str,
    idle_window_s: f64,
    unchanged: usize,
}

fn cost_level(ctx: &Ctx, n: usize, idle_window: Duration) -> Result<CostLevel> {
    let edits = ctx.plan.cost_edits;
    progress(format!(
        "controller cost: {n} servers, idle {:?}, {edits} edits",
        idle_window
    ));
    // No socket client during the measurement: its cost is not the edit's.
    let mut r = start_steward(ctx, n, false)?;
    let cold_ms = r.cold_ms;
    let pid = r.stw.pid;
    // Deliberate settling after the cold start.
    std::thread::sleep(ctx.debounce + Duration::from_millis(500));
    let a = cpu_sample(pid)?;
    std::thread::sleep(idle_window);
    let b = cpu_sample(pid)?;
    let idle = cpu_delta(&a, &b);

    let mut churn = Churn::new(&r.fleet);
    let mut restart_ms = Vec::new();
    let c = cpu_sample(pid)?;
    for k in 0..edits {
        let idx = r.fleet.target(k);
        let prev = r.fleet.starts_of(idx);
        r.fleet.set(idx, EDIT_KEY, &format!("c{k}"));
        let t0 = write_by_rename(&r.settings, &r.fleet.content(false), k as u64 + 1)?;
        let (_, listed) = wait_new_process(&r.fleet, idx, &prev, true)?;
        restart_ms.push(ms(listed - t0));
        churn.close(&r.fleet, &[idx]);
        sleep_until(ctx.next_edit_at(t0));
    }
    // The last edit's spacing is part of the window, so its work is counted;
    // a window of whole ping periods holds the same ping work as the idle rate.
    if let Some(q) = ctx.plan.cost_window_quantum {
        let k = (c.at.elapsed().as_secs_f64() / q.as_secs_f64())
            .ceil()
            .max(1.0);
        sleep_until(c.at + q.mul_f64(k));
    }
    let d = cpu_sample(pid)?;
    let e = cpu_delta(&c, &d);
    let k = edits.max(1) as f64;
    let idle_rate_stat = idle.stat_ms / idle.wall_s;
    let idle_rate_sched = idle.sched_ms / idle.wall_s;
    let per_edit_stat = e.stat_ms / k;
    let per_edit_net = (e.stat_ms - idle_rate_stat * e.wall_s) / k;
    let per_edit_sched = e.sched_ms / k;
    let per_edit_sched_net = (e.sched_ms - idle_rate_sched * e.wall_s) / k;
    let status = r.stw.status()?;
    let all_ok = all_ready(&status, &r.fleet)
        && (0..edits).all(|k| {
            let idx = r.fleet.target(k);
            mcp(&status, &r.fleet.names[idx])
                .and_then(|m| spec_env(m, EDIT_KEY))
                .is_some_and(|v| r.fleet.extra[idx].get(EDIT_KEY).map(String::as_str) == Some(v))
        });
    let hwm = status_kb(pid, "VmHWM:");
    let idle_pct = idle.stat_ms / 10.0 / idle.wall_s;
    let idle_pct_sched = idle.sched_ms / 10.0 / idle.wall_s;
    let sched_complete = idle.exited_threads == 0 && e.exited_threads == 0;
    let (per_edit_best, per_edit_best_net, idle_pct_best, best_source) = if sched_complete {
        (
            per_edit_sched,
            per_edit_sched_net,
            idle_pct_sched,
            "schedstat",
        )
    } else {
        (per_edit_stat, per_edit_net, idle_pct, "stat")
    };
    let json = json!({
        "servers": n,
        "coldStartMs": r1(cold_ms),
        "idle": {
            "windowS": r3(idle.wall_s),
            "cpuPctStat": r3(idle_pct),
            "cpuPctSchedstat": r3(idle_pct_sched),
            "threadsExitedInWindow": idle.exited_threads,
        },
        "edits": edits,
        "editWindowS": r3(e.wall_s),
        "cpuMsPerEditStat": r3(per_edit_stat),
        "cpuMsPerEditStatMinusIdle": r3(per_edit_net),
        "cpuMsPerEditSchedstat": r3(per_edit_sched),
        "cpuMsPerEditSchedstatMinusIdle": r3(per_edit_sched_net),
        "threadsExitedInEditWindow": e.exited_threads,
        "statResolutionMsPerWindow": r1(1000.0 / clk_tck() as f64),
        "writeToNewProcessListedTools": summary_ms(&restart_ms),
        "churn": churn.json(),
        "allReadyWithTheirEditsAtEnd": all_ok,
        "peakRssMb": mb(hwm),
        "teardown": r.finish(),
    });
    Ok(CostLevel {
        n,
        json,
        per_edit_stat_ms: per_edit_stat,
        per_edit_net_ms: per_edit_net,
        per_edit_sched_ms: per_edit_sched,
        per_edit_best_ms: per_edit_best,
        per_edit_best_net_ms: per_edit_best_net,
        idle_pct_best,
        best_source,
        idle_window_s: idle.wall_s,
        unchanged: churn.unchanged_restarts,
    })
}

// ---------------------------------------------------------------------------
// mcp-hub side by side

/// A minimal HTTP/1.1 request (Connection: close); returns status and body.
fn http(port: u16, method: &str, path: &str, body: Option<&str>) -> Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("no HTTP header end"))?;
    let code: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow!("bad status line"))?;
    let chunked = head
        .lines()
        .any(|l| l.to_ascii_lowercase().starts_with("transfer-encoding:") && l.contains("chunked"));
    let body = if chunked {
        let mut out = String::new();
        let mut rest = rest;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 || after.len() < n {
                break;
            }
            out.push_str(&after[..n]);
            rest = after[n..].trim_start_matches("\r\n");
        }
        out
    } else {
        rest.to_owned()
    };
    Ok((code, body))
}

struct Hub {
    child: Option<Child>,
    pid: u32,
    port: u16,
    log: PathBuf,
    spawned: Instant,
    reg: u64,
}

impl Hub {
    fn spawn(exe: &Path, config: &Path, root: &Path) -> Result<Hub> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let home = root.join("hub-home");
        std::fs::create_dir_all(&home)?;
        let log = root.join("mcp-hub.log");
        let out = std::fs::File::create(&log)?;
        let err = out.try_clone()?;
        let mut cmd = Command::new(exe);
        cmd.args(["--port", &port.to_string(), "--config"])
            .arg(config)
            .arg("--watch")
            .env_clear()
            .envs(base_env())
            .env("HOME", &home)
            .env("XDG_STATE_HOME", home.join("state"))
            .env("XDG_DATA_HOME", home.join("data"))
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_CACHE_HOME", home.join("cache"))
            .current_dir(root)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Its own process group: the fakes it spawns can be stopped with it.
            .process_group(0);
        let spawned = Instant::now();
        let child = cmd
            .spawn()
            .with_context(|| format!("spawn {}", exe.display()))?;
        let pid = child.id();
        let reg = register(Live::Proc {
            pid: pid as i32,
            group: true,
        });
        Ok(Hub {
            child: Some(child),
            pid,
            port,
            log,
            spawned,
            reg,
        })
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }

    fn check_running(&mut self) -> Result<()> {
        if let Some(Ok(Some(code))) = self.child.as_mut().map(Child::try_wait) {
            bail!("mcp-hub exited with {code}:\n{}", self.log_tail());
        }
        Ok(())
    }

    /// `GET /api/servers` → name → status.
    fn statuses(&self) -> Result<BTreeMap<String, String>> {
        let (code, body) = http(self.port, "GET", "/api/servers", None)?;
        if code != 200 {
            bail!("GET /api/servers: HTTP {code}");
        }
        let v: Value = serde_json::from_str(&body)?;
        Ok(v["servers"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|s| {
                        (
                            s["name"].as_str().unwrap_or("").to_owned(),
                            s["status"].as_str().unwrap_or("").to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// `POST /api/servers/info` → the server's status.
    fn status_of(&self, name: &str) -> Result<String> {
        let body = json!({ "server_name": name }).to_string();
        let (code, text) = http(self.port, "POST", "/api/servers/info", Some(&body))?;
        if code != 200 {
            bail!("POST /api/servers/info: HTTP {code}: {text}");
        }
        let v: Value = serde_json::from_str(&text)?;
        Ok(v["server"]["status"].as_str().unwrap_or("").to_owned())
    }

    fn terminate(&mut self) -> Option<bool> {
        let mut child = self.child.take()?;
        signal(self.pid as i32, libc::SIGTERM);
        let start = Instant::now();
        let mut clean = None;
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(status)) = child.try_wait() {
                clean = Some(status.success());
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // Whatever is left of its group (fakes it did not stop) goes too.
        signal(-(self.pid as i32), libc::SIGKILL);
        if clean.is_none() {
            let _ = child.kill();
            let _ = child.wait();
            clean = Some(false);
        }
        unregister(self.reg);
        clean
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.terminate();
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn find_mcp_hub(opts: &Opts) -> Result<(PathBuf, Value)> {
    let exe = opts
        .mcp_hub
        .clone()
        .unwrap_or_else(|| repo_root().join(".peers/node_modules/.bin/mcp-hub"));
    if !exe.exists() {
        bail!(
            "mcp-hub is not installed at {} (`.ci/run` installs it; or \
             `npm install --prefix .peers mcp-hub@4.2.1`)",
            exe.display()
        );
    }
    let node = Command::new("node")
        .arg("--version")
        .output()
        .map_err(|e| anyhow!("node is not runnable: {e}"))?;
    let node = String::from_utf8_lossy(&node.stdout).trim().to_owned();
    let real = std::fs::canonicalize(&exe).unwrap_or(exe.clone());
    let version = real
        .ancestors()
        .map(|d| d.join("package.json"))
        .find(|p| p.exists())
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["version"].as_str().map(str::to_owned));
    Ok((
        exe.clone(),
        json!({ "exe": exe.display().to_string(), "version": version, "node": node }),
    ))
}

struct HubRun {
    sb: Sandbox,
    fleet: Fleet,
    config: PathBuf,
    hub: Hub,
    cold_ms: f64,
    spawned_ms: f64,
}

fn start_hub(exe: &Path, ctx: &Ctx, n: usize) -> Result<HubRun> {
    start_hub_with(exe, ctx, n, &FakeMcpConfig::default())
}

fn start_hub_with(exe: &Path, ctx: &Ctx, n: usize, base: &FakeMcpConfig) -> Result<HubRun> {
    let sb = Sandbox::new();
    let config = sb.env.root.path().join("mcp-hub.json");
    let fleet = Fleet::with(&ctx.fake, &sb.env.records(), n, base);
    write_by_rename(&config, &fleet.content(false), 0)?;
    let mut hub = Hub::spawn(exe, &config, sb.env.root.path())?;
    let limit = deadline_for(n);
    let deadline = Instant::now() + limit;
    let mut all_spawned = None;
    let t_ready = loop {
        if Instant::now() > deadline {
            bail!(
                "mcp-hub did not connect {n} servers within {limit:?}\n{}",
                hub.log_tail()
            );
        }
        hub.check_running()?;
        if all_spawned.is_none() {
            // Free for mcp-hub: wait on the record files first.
            if fleet.start_counts().iter().all(|c| *c > 0) {
                all_spawned = Some(Instant::now());
            }
        } else if let Ok(st) = hub.statuses()
            && st.len() == n
            && st.values().all(|s| s == "connected")
        {
            break Instant::now();
        }
        // The polling interval (record files, then /api/servers).
        std::thread::sleep(sweep_interval(n));
    };
    Ok(HubRun {
        cold_ms: ms(t_ready - hub.spawned),
        spawned_ms: ms(all_spawned.unwrap_or(t_ready) - hub.spawned),
        sb,
        fleet,
        config,
        hub,
    })
}

/// One edit under mcp-hub: write, wait for a new process of the server
/// (record file), then for `connected` in its API. Returns (write → new
/// process seen, write → connected).
fn hub_edit(run: &mut HubRun, idx: usize, value: &str, seq: u64) -> Result<(Instant, f64, f64)> {
    let prev = run.fleet.starts_of(idx);
    run.fleet.set(idx, EDIT_KEY, value);
    let t0 = write_by_rename(&run.config, &run.fleet.content(false), seq)?;
    let (spawn, _) = wait_new_process(&run.fleet, idx, &prev, false)?;
    let name = run.fleet.names[idx].clone();
    let deadline = Instant::now() + DEADLINE;
    loop {
        run.hub.check_running()?;
        if run.hub.status_of(&name)? == "connected" {
            return Ok((t0, ms(spawn - t0), ms(Instant::now() - t0)));
        }
        if Instant::now() > deadline {
            bail!("mcp-hub did not reconnect {name} within {DEADLINE:?}");
        }
        // The polling interval of the API.
        std::thread::sleep(Duration::from_millis(2));
    }
}

struct HubResult {
    json: Value,
    cold: Vec<f64>,
    ready: Vec<f64>,
    hwm_kb: Option<u64>,
    n: usize,
}

/// Spacing between mcp-hub edits: its watcher waits for the file to be
/// stable for 200 ms (polled every 100 ms) before it reads it.
const HUB_SPACING: Duration = Duration::from_millis(600);

fn mcp_hub(ctx: &Ctx) -> Result<HubResult> {
    let (exe, about) = find_mcp_hub(&ctx.opts)?;
    let n = ctx.plan.hub_n;
    let (mut cold, mut spawned) = (Vec::new(), Vec::new());
    let mut run = None;
    let mut teardown = Vec::new();
    for rep in 0..ctx.plan.hub_cold_repeats {
        progress(format!("mcp-hub cold start: {n} servers (run {})", rep + 1));
        if let Some(mut old) = run.take() {
            let HubRun {
                ref mut hub,
                ref sb,
                ..
            } = old;
            let clean = hub.terminate();
            teardown.push(
                json!({"exitedCleanly": clean, "fakesLeftRunningAndKilled": sb.reap_fakes()}),
            );
        }
        let r = start_hub(&exe, ctx, n)?;
        cold.push(r.cold_ms);
        spawned.push(r.spawned_ms);
        run = Some(r);
    }
    let mut run = run.ok_or_else(|| anyhow!("no mcp-hub run"))?;
    progress(format!(
        "mcp-hub reload: {n} servers, {} edits",
        ctx.plan.hub_edits
    ));
    std::thread::sleep(HUB_SPACING);
    let mut churn = Churn::new(&run.fleet);
    let (mut spawn_ms, mut ready) = (Vec::new(), Vec::new());
    let mut seq = 1;
    for k in 0..ctx.plan.hub_edits {
        let idx = run.fleet.target(k);
        let (t0, s, r) = hub_edit(&mut run, idx, &format!("e{k}"), seq)?;
        seq += 1;
        spawn_ms.push(s);
        ready.push(r);
        churn.close(&run.fleet, &[idx]);
        sleep_until((t0 + HUB_SPACING).max(Instant::now() + Duration::from_millis(100)));
    }
    // Reorder-only rewrite, processed before a sentinel edit.
    let mut reorder = Churn::new(&run.fleet);
    let t_r = write_by_rename(&run.config, &run.fleet.content(true), seq)?;
    seq += 1;
    sleep_until(t_r + HUB_SPACING);
    let sentinel = run.fleet.target(2000);
    let (t0, _, _) = hub_edit(&mut run, sentinel, "sentinel", seq)?;
    sleep_until(t0 + HUB_SPACING);
    reorder.close(&run.fleet, &[sentinel]);
    churn.close(&run.fleet, &[sentinel]);
    let hwm = status_kb(run.hub.pid, "VmHWM:");
    let cpu = cpu_ticks(run.hub.pid);
    let spawn_to_ready: Vec<f64> = ready.iter().zip(&spawn_ms).map(|(r, s)| r - s).collect();
    let clean = run.hub.terminate();
    teardown
        .push(json!({"exitedCleanly": clean, "fakesLeftRunningAndKilled": run.sb.reap_fakes()}));
    let mut json = about;
    json["servers"] = json!(n);
    json["coldStart"] = json!({
        "runs": cold.len(),
        "spawnToAllConnected": summary_ms(&cold),
        "spawnToAllProcessesStarted": summary_ms(&spawned),
        "how": "record files until every fake started, then GET /api/servers every 5 ms \
                until all are `connected`",
    });
    json["reload"] = json!({
        "edits": ready.len(),
        "latencyWriteToConnected": summary_ms(&ready),
        "latencyWriteToNewProcess": summary_ms(&spawn_ms),
        "latencyNewProcessToConnected": summary_ms(&spawn_to_ready),
        "how": "rename into place; the fake's record file shows the new process (polled every \
                1 ms), then POST /api/servers/info every 2 ms until `connected`",
    });
    json["churn"] = churn.json();
    json["reorderOnlyEdit"] = json!({
        "unchangedRestarts": reorder.unchanged_restarts,
        "unchangedRestarted": reorder.offenders,
        "sentinelRestarts": reorder.target_restarts.first().copied().unwrap_or(0),
    });
    json["peakRssMb"] = mb(hwm);
    json["cpuTotalS"] = json!(cpu.map(|t| r3(t as f64 / clk_tck() as f64)));
    json["teardown"] = teardowns(&teardown);
    Ok(HubResult {
        json,
        cold,
        ready,
        hwm_kb: hwm,
        n,
    })
}

// ---------------------------------------------------------------------------
// Machine, main

fn machine() -> Value {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .ok();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_owned());
    let mem = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find(|l| l.starts_with("MemTotal:"))?
            .split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()
    });
    json!({
        "nproc": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "kernel": kernel,
        "cpuModel": model,
        "memTotalMb": mem.map(|k| k / 1024),
        "clockTicksPerS": clk_tck(),
    })
}

fn git() -> Value {
    let root = repo_root();
    let run = |args: &[&str]| {
        Command::new("git")
            .arg("--no-optional-locks")
            .arg("-C")
            .arg(&root)
            .args(args)
            .stderr(Stdio::null())
            .output()
            .ok()
    };
    let commit = run(&["rev-parse", "--short", "HEAD"])
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let dirty = run(&["diff", "--name-only", "HEAD", "--"])
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        });
    json!({ "commit": commit, "modifiedFiles": dirty })
}

/// Source files (controller, schema, this crate, manifests) modified after
/// `binary` was built: figures from a stale binary must not carry the commit.
fn newer_sources(binary: &Path) -> Vec<String> {
    let Ok(built) = std::fs::metadata(binary).and_then(|m| m.modified()) else {
        return vec![format!("{}: no mtime", binary.display())];
    };
    let root = repo_root();
    let mut stack: Vec<PathBuf> = ["controller", "schema"]
        .iter()
        .map(|d| root.join(d))
        .collect();
    let mut newer: Vec<String> = [
        "Cargo.toml",
        "Cargo.lock",
        "tests/Cargo.toml",
        "tests/src/bin/steward-under-test.rs",
    ]
    .iter()
    .map(|f| root.join(f))
    .filter(|f| {
        std::fs::metadata(f)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t > built)
    })
    .map(|f| f.display().to_string())
    .collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs" || x == "toml")
                && meta.modified().is_ok_and(|t| t > built)
            {
                newer.push(
                    path.strip_prefix(&root)
                        .unwrap_or(&path)
                        .display()
                        .to_string(),
                );
            }
        }
    }
    newer.sort();
    newer
}

fn unix_s(t: std::io::Result<SystemTime>) -> Option<u64> {
    t.ok()?
        .duration_since(SystemTime::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

fn target(value: Value, target: &str, met: Option<bool>) -> Value {
    json!({ "value": value, "target": target, "met": met })
}

/// (busy, total) jiffies of the whole machine from /proc/stat.
fn machine_jiffies() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let f: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest is inside user).
    let idle = f.get(3)? + f.get(4).unwrap_or(&0);
    let total: u64 = f.iter().take(8).sum();
    Some((total - idle, total))
}

/// Machine-wide CPU busy % per scenario (the bench, its controller and
/// fakes included): a high figure where the scenario itself is light means
/// something else ran on the machine during it.
static MACHINE_BUSY: Mutex<Vec<(String, f64, f64)>> = Mutex::new(Vec::new());

fn run_scenario<T>(name: &str, f: impl FnOnce() -> Result<T>) -> Result<T, Value> {
    let started = Instant::now();
    let before = machine_jiffies();
    let r = f();
    if let (Some((b0, t0)), Some((b1, t1))) = (before, machine_jiffies())
        && t1 > t0
    {
        let busy = 100.0 * (b1 - b0) as f64 / (t1 - t0) as f64;
        MACHINE_BUSY
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((
                name.to_owned(),
                r1(busy),
                r1(started.elapsed().as_secs_f64()),
            ));
    }
    progress(format!(
        "{name}: done in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    r.map_err(|e| {
        progress(format!("{name} failed: {e:#}"));
        json!({ "error": format!("{e:#}") })
    })
}

fn main() {
    let opts = match parse_opts() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("steward-bench: {e:#}");
            std::process::exit(2);
        }
    };
    install_signal_cleanup();
    let code = match bench(opts) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("steward-bench: {e:#}");
            1
        }
    };
    cleanup_all();
    std::process::exit(code);
}

fn bench(opts: Opts) -> Result<()> {
    let started = Instant::now();
    let started_wall = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let steward = opts.bin_dir.join("steward-under-test");
    let fake = opts.bin_dir.join("fake-mcp-server");
    for b in [&steward, &fake] {
        if !b.exists() {
            bail!(
                "{} is not built (cargo build --release -p steward-tests --bins)",
                b.display()
            );
        }
    }
    let plan = Plan::new(&opts);
    let ctx = Ctx {
        debounce: Duration::from_millis(opts.debounce_ms),
        plan,
        steward,
        fake,
        opts,
    };
    let on = |s: &str| ctx.opts.only.contains(s);
    let mut out = json!({
        "tool": "steward-bench",
        "mode": if ctx.opts.quick { "quick" } else { "full" },
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "startedAtUnixS": started_wall,
        "machine": machine(),
        "git": git(),
        "binaries": {
            "controllerBuiltAtUnixS": unix_s(std::fs::metadata(&ctx.steward).and_then(|m| m.modified())),
            "fakeServerBuiltAtUnixS": unix_s(std::fs::metadata(&ctx.fake).and_then(|m| m.modified())),
            "sourcesNewerThanController": newer_sources(&ctx.steward),
        },
        "settings": {
            "controller": ctx.steward.display().to_string(),
            "fakeServer": ctx.fake.display().to_string(),
            "debounceMs": ctx.opts.debounce_ms,
            "observe": match ctx.opts.observe { Observe::Watch => "watch stream", Observe::Poll => "status poll every 2 ms" },
            "editSpacingMs": ms(ctx.debounce + SPACING_MARGIN),
            "controllerFlags": format!(
                "run --debounce-ms {} {}(other flags default; RUST_LOG unset)",
                ctx.opts.debounce_ms,
                ctx.opts.controller_args.iter().map(|a| format!("{a} ")).collect::<String>()
            ),
        },
        "method": {
            "latency": "from right before rename(2) of the whole settings.json to the first status \
                        document showing the edited server Ready with observedHash == configHash, \
                        the new env and a new pid",
            "restarts": "start events in the fakes' record files, per edit window",
            "cpu": "utime+stime from /proc/<pid>/stat (whole process); schedstat: sum over live threads",
            "rss": "VmHWM from /proc/<pid>/status",
            "percentiles": "nearest rank",
        },
    });

    let mut levels: Vec<ReloadLevel> = Vec::new();
    if on("reload") {
        let mut reload = serde_json::Map::new();
        for &n in &ctx.plan.reload_ns.clone() {
            let probes = if n == ctx.plan.probe_n {
                ctx.plan.debounce_probes
            } else {
                0
            };
            match run_scenario(&format!("reload n={n}"), || reload_level(&ctx, n, probes)) {
                Ok(l) => {
                    reload.insert(format!("n{n}"), l.json.clone());
                    levels.push(l);
                }
                Err(e) => {
                    reload.insert(format!("n{n}"), e);
                }
            }
        }
        out["reload"] = Value::Object(reload);
        out["churn"] = json!({
            "unchangedRestartsAcrossReloadEdits": levels.iter().map(|l| l.unchanged_restarts).sum::<usize>(),
            "perLevel": levels.iter().map(|l| (format!("n{}", l.n), json!(l.unchanged_restarts))).collect::<serde_json::Map<_, _>>(),
        });
    }
    let burst_r = on("burst").then(|| run_scenario("burst", || burst(&ctx)));
    if let Some(b) = &burst_r {
        out["burst"] = match b {
            Ok(b) => b.json.clone(),
            Err(e) => e.clone(),
        };
    }
    let cold_r = on("cold").then(|| run_scenario("cold", || cold(&ctx)));
    if let Some(c) = &cold_r {
        out["coldStart"] = match c {
            Ok(c) => c.json.clone(),
            Err(e) => e.clone(),
        };
    }
    let mut costs: Vec<CostLevel> = Vec::new();
    if on("cost") {
        let mut cost = serde_json::Map::new();
        for &n in &ctx.plan.cost_ns.clone() {
            let idle = if n == ctx.plan.idle_n {
                ctx.plan.idle_window
            } else {
                ctx.plan.cost_idle
            };
            match run_scenario(&format!("cost n={n}"), || cost_level(&ctx, n, idle)) {
                Ok(c) => {
                    cost.insert(format!("n{n}"), c.json.clone());
                    costs.push(c);
                }
                Err(e) => {
                    cost.insert(format!("n{n}"), e);
                }
            }
        }
        let lo = costs.first();
        let hi = costs.last().filter(|_| costs.len() > 1);
        if let (Some(lo), Some(hi)) = (lo, hi) {
            cost.insert(
                "perEditCpuRatio".into(),
                json!({
                    "between": format!("n{} / n{}", hi.n, lo.n),
                    "stat": r3(hi.per_edit_stat_ms / lo.per_edit_stat_ms),
                    "statMinusIdle": r3(hi.per_edit_net_ms / lo.per_edit_net_ms),
                    "schedstat": r3(hi.per_edit_sched_ms / lo.per_edit_sched_ms),
                    "schedstatMinusIdle": r3(hi.per_edit_best_net_ms / lo.per_edit_best_net_ms),
                    "cpuMsPerEdit": {
                        format!("n{}", lo.n): r3(lo.per_edit_best_ms),
                        format!("n{}", hi.n): r3(hi.per_edit_best_ms),
                    },
                    "cpuMsPerEditMinusIdle": {
                        format!("n{}", lo.n): r3(lo.per_edit_best_net_ms),
                        format!("n{}", hi.n): r3(hi.per_edit_best_net_ms),
                    },
                    "source": hi.best_source,
                }),
            );
        }
        if let Some(idle) = costs.iter().find(|c| c.n == ctx.plan.idle_n) {
            cost.insert(
                "idle".into(),
                json!({
                    "servers": idle.n,
                    "windowS": r3(idle.idle_window_s),
                    "cpuPct": r3(idle.idle_pct_best),
                    "source": idle.best_source,
                    "windowCoversPingPeriod": idle.idle_window_s >= PING_PERIOD.as_secs_f64(),
                    "pingPeriodS": PING_PERIOD.as_secs(),
                }),
            );
        }
        out["controllerCost"] = Value::Object(cost);
    }
    // Peak RSS with `rss_n` servers: every run at that size.
    let mut rss_kb: Vec<u64> = levels
        .iter()
        .filter(|l| l.n == ctx.plan.rss_n)
        .filter_map(|l| l.hwm_kb)
        .collect();
    if let Some(Ok(c)) = &cold_r
        && ctx.plan.cold_n == ctx.plan.rss_n
    {
        rss_kb.extend(&c.hwm_kb);
    }
    let peak_rss = rss_kb.iter().max().copied();
    if out.get("controllerCost").is_none() && peak_rss.is_some() {
        out["controllerCost"] = json!({});
    }
    if let Some(c) = out.get_mut("controllerCost").filter(|_| !rss_kb.is_empty()) {
        c["peakRss"] =
            json!({ "servers": ctx.plan.rss_n, "peakRssMb": mb(peak_rss), "runs": rss_kb.len() });
    }

    let hub = on("mcp-hub").then(|| run_scenario("mcp-hub", || mcp_hub(&ctx)));
    if let Some(h) = &hub {
        out["mcpHub"] = match h {
            Ok(h) => h.json.clone(),
            Err(e) => e.clone(),
        };
    }

    let mut more_targets = serde_json::Map::new();
    if on("readiness") {
        out["readiness"] = match run_scenario("readiness", || readiness::readiness(&ctx)) {
            Ok(r) => {
                more_targets.extend(r.targets);
                r.json
            }
            Err(e) => e,
        };
    }
    if on("gate") {
        out["gate"] = match run_scenario("gate", || readiness::gate(&ctx)) {
            Ok((json, t)) => {
                more_targets.extend(t);
                json
            }
            Err(e) => e,
        };
    }

    if on("gateway") {
        out["gateway"] = match run_scenario("gateway", || gateway::gateway(&ctx)) {
            Ok((json, t)) => {
                more_targets.extend(t);
                json
            }
            Err(e) => e,
        };
    }

    // Ratios steward / mcp-hub, at the same N.
    if let Some(Ok(h)) = &hub {
        let mut ratios = serde_json::Map::new();
        if let Some(Ok(c)) = &cold_r
            && ctx.plan.cold_n == h.n
        {
            let (s, m) = (summarize(&c.all_ready).p50, summarize(&h.cold).p50);
            let w = summarize(&c.with_watch).p50;
            ratios.insert(
                "coldStartP50".into(),
                json!({"stewardMs": r1(s), "mcpHubMs": r1(m), "ratio": r3(s / m)}),
            );
            ratios.insert(
                "coldStartP50StewardWithWatchClient".into(),
                json!({"stewardMs": r1(w), "mcpHubMs": r1(m), "ratio": r3(w / m)}),
            );
        }
        if let Some(l) = levels.iter().find(|l| l.n == h.n) {
            let (s, m) = (summarize(&l.ready), summarize(&h.ready));
            ratios.insert(
                "reloadP50".into(),
                json!({"stewardMs": r1(s.p50), "mcpHubMs": r1(m.p50), "ratio": r3(s.p50 / m.p50)}),
            );
            ratios.insert(
                "reloadP95".into(),
                json!({"stewardMs": r1(s.p95), "mcpHubMs": r1(m.p95), "ratio": r3(s.p95 / m.p95)}),
            );
            if let (Some(a), Some(b)) = (l.hwm_kb, h.hwm_kb) {
                ratios.insert("peakRss".into(), json!({"stewardMb": mb(Some(a)), "mcpHubMb": mb(Some(b)), "ratio": r3(a as f64 / b as f64)}));
            }
        }
        ratios.insert("servers".into(), json!(h.n));
        out["ratios"] = Value::Object(ratios);
    }

    // The issue's targets.
    let mut t = serde_json::Map::new();
    if let Some(l) = levels.iter().find(|l| l.n == 100) {
        let s = summarize(&l.ready);
        t.insert(
            "reloadP50N100Ms".into(),
            target(json!(r1(s.p50)), "<= 100", Some(s.p50 <= 100.0)),
        );
        t.insert(
            "reloadP95N100Ms".into(),
            target(json!(r1(s.p95)), "<= 150", Some(s.p95 <= 150.0)),
        );
        let a = summarize(&l.applied);
        t.insert(
            "debounceNotInLatencyApplyP50Ms".into(),
            target(
                json!(r1(a.p50)),
                "<< debounce",
                Some(a.p50 < ms(ctx.debounce) / 2.0),
            ),
        );
    }
    let mut unchanged: usize = levels.iter().map(|l| l.unchanged_restarts).sum::<usize>()
        + costs.iter().map(|c| c.unchanged).sum::<usize>();
    if let Some(Ok(b)) = &burst_r {
        unchanged += b.unchanged;
        t.insert(
            "burstRestarts".into(),
            target(json!(b.restarts), "<= 2", Some(b.restarts <= 2)),
        );
    }
    for l in &levels {
        unchanged += l.json["reorderOnlyEdit"]["unchangedRestarts"]
            .as_u64()
            .unwrap_or(0) as usize;
    }
    t.insert(
        "unchangedRestarts".into(),
        target(json!(unchanged), "== 0", Some(unchanged == 0)),
    );
    if let (Some(Ok(c)), Some(Ok(h))) = (&cold_r, &hub)
        && ctx.plan.cold_n == h.n
    {
        let (s, m) = (summarize(&c.all_ready).p50, summarize(&h.cold).p50);
        t.insert(
            format!("coldStartN{}FasterThanMcpHub", h.n),
            target(
                json!({"stewardMs": r1(s), "mcpHubMs": r1(m)}),
                "steward < mcp-hub",
                Some(s < m),
            ),
        );
    }
    if costs.len() > 1 {
        let (lo, hi) = (&costs[0], &costs[costs.len() - 1]);
        // The edit's own CPU: the idle rate (the pings of N idle servers,
        // which have their own target) is taken out of the edit window.
        let ratio = hi.per_edit_best_net_ms / lo.per_edit_best_net_ms;
        let total = hi.per_edit_best_ms / lo.per_edit_best_ms;
        t.insert(
            format!("cpuPerEditN{}OverN{}", hi.n, lo.n),
            target(
                json!({"minusIdle": r3(ratio), "includingIdle": r3(total)}),
                "minusIdle <= 2",
                Some(ratio <= 2.0),
            ),
        );
    }
    if let Some(idle) = costs.iter().find(|c| c.n == ctx.plan.idle_n) {
        t.insert(
            format!("idleCpuPctN{}", idle.n),
            target(
                json!(r3(idle.idle_pct_best)),
                "<= 0.1",
                // A window shorter than the ping period may miss a ping round.
                (idle.idle_window_s >= PING_PERIOD.as_secs_f64())
                    .then_some(idle.idle_pct_best <= 0.1),
            ),
        );
    }
    if let Some(k) = peak_rss {
        let m = k as f64 / 1024.0;
        t.insert(
            format!("peakRssN{}Mb", ctx.plan.rss_n),
            target(json!(r1(m)), "<= 30", Some(m <= 30.0)),
        );
    }
    t.extend(more_targets);
    out["targets"] = Value::Object(t);
    out["elapsedS"] = json!(r1(started.elapsed().as_secs_f64()));
    out["machineBusyPctPerScenario"] = MACHINE_BUSY
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(name, busy, secs)| (name.clone(), json!({ "busyPct": busy, "durationS": secs })))
        .collect::<serde_json::Map<_, _>>()
        .into();
    out["loadAverageAtEnd"] = json!(
        std::fs::read_to_string("/proc/loadavg").ok().map(|l| l
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "))
    );

    let text = serde_json::to_string_pretty(&out)?;
    println!("{text}");
    if let Some(path) = &ctx.opts.out {
        std::fs::write(path, format!("{text}\n"))
            .with_context(|| format!("write {}", path.display()))?;
    }
    Ok(())
}

//! Options of `steward-bench`: the command line, the plan of sizes it
//! implies, and the context every scenario gets.

use super::*;

/// Added between the debounce window and the next write.
pub const SPACING_MARGIN: Duration = Duration::from_millis(100);
/// Bound on any single wait for a condition.
pub const DEADLINE: Duration = Duration::from_secs(30);
/// The controller's default MCP ping interval (`--ping-interval-ms`): pings
/// of servers started together come in rounds of this period.
pub const PING_PERIOD: Duration = Duration::from_secs(15);
/// Env var changed by edits (part of the connection fingerprint).
pub const EDIT_KEY: &str = "BENCH_EDIT";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observe {
    Watch,
    Poll,
}

#[derive(Debug, Clone)]
pub struct Opts {
    pub quick: bool,
    pub only: BTreeSet<String>,
    pub observe: Observe,
    pub edits: usize,
    pub debounce_ms: u64,
    pub mcp_hub: Option<PathBuf>,
    pub no_mcp_hub: bool,
    pub out: Option<PathBuf>,
    pub bin_dir: PathBuf,
    pub reload_ns: Option<Vec<usize>>,
    pub cost_ns: Option<Vec<usize>>,
    pub controller_args: Vec<String>,
    /// Server counts of the `readiness` cold starts (`--cold-ns`).
    pub cold_ns: Option<Vec<usize>>,
    /// `initializeDelayMs` of the `readiness` and `gate` fakes (an `npx`
    /// server's start).
    pub init_delay_ms: u64,
    /// `startCpuMs` of the `readiness` and `gate` fakes.
    pub start_cpu_ms: u64,
}

pub const SCENARIOS: &[&str] = &[
    "reload",
    "burst",
    "cold",
    "cost",
    "mcp-hub",
    "readiness",
    "gate",
    "gateway",
    "search",
    "storm",
    "first-list",
    "restarts",
    "lazy",
    "dev",
    "sandbox",
    "sandbox-cost",
    "observe",
    "code",
    "views",
];

pub const USAGE: &str = "\
steward-bench: benchmarks of `steward run` with fake MCP servers (JSON on stdout)

Options:
  --quick               small smoke run (< 30 s)
  --only A,B            scenarios: reload, burst, cold, cost, mcp-hub, readiness, gate,
                        gateway, search, storm, first-list, restarts, lazy, dev, sandbox,
                        sandbox-cost, observe, code, views
                        (default: all)
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

pub fn parse_opts() -> Result<Opts> {
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
pub struct Plan {
    pub reload_ns: Vec<usize>,
    pub edits: usize,
    pub debounce_probes: usize,
    /// The reload level whose run also carries the debounce probes.
    pub probe_n: usize,
    pub burst_n: usize,
    pub burst_saves: usize,
    pub cold_n: usize,
    pub cold_repeats: usize,
    pub cost_ns: Vec<usize>,
    pub cost_edits: usize,
    /// Idle window used for the idle-CPU subtraction at each cost level.
    pub cost_idle: Duration,
    /// Edit windows are rounded up to a multiple of this (the ping period).
    pub cost_window_quantum: Option<Duration>,
    /// The cost level whose idle window is the reported idle CPU.
    pub idle_n: usize,
    pub idle_window: Duration,
    pub rss_n: usize,
    pub hub_n: usize,
    pub hub_edits: usize,
    pub hub_cold_repeats: usize,
    /// `storm`: list_changed notifications per second, for how long, and
    /// the tools of the storming server.
    pub storm_per_second: u64,
    pub storm_duration: Duration,
    pub storm_tools: usize,
}

impl Plan {
    pub fn new(o: &Opts) -> Plan {
        let mut plan = Plan::sized(o);
        if let Some(ns) = &o.reload_ns {
            plan.reload_ns = ns.clone();
        }
        if let Some(ns) = &o.cost_ns {
            plan.cost_ns = ns.clone();
        }
        plan
    }

    pub fn sized(o: &Opts) -> Plan {
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
                storm_per_second: 1000,
                storm_duration: Duration::from_secs(2),
                storm_tools: 200,
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
                storm_per_second: 1000,
                storm_duration: Duration::from_secs(10),
                storm_tools: 200,
            }
        }
    }
}

pub struct Ctx {
    pub opts: Opts,
    pub plan: Plan,
    pub steward: PathBuf,
    pub fake: PathBuf,
    pub debounce: Duration,
}

impl Ctx {
    /// The earliest time the next edit may be written after one written at `t0`.
    pub fn next_edit_at(&self, t0: Instant) -> Instant {
        t0 + self.debounce + SPACING_MARGIN
    }
}

/// The workspace checkout (the parent of `tests/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

//! Measuring for `steward-bench`: CPU and memory from /proc, statistics
//! and JSON helpers.

use super::*;

pub fn clk_tck() -> u64 {
    #[allow(unsafe_code)]
    // SAFETY: sysconf reads a constant of the running system.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// utime + stime of the whole process, in clock ticks.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime is field 14, stime field 15.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Per-thread on-CPU time (ns) from /proc/<pid>/task/*/schedstat.
pub fn task_ns(pid: u32) -> BTreeMap<u32, u64> {
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

pub fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[derive(Debug, Clone)]
pub struct CpuSample {
    pub at: Instant,
    pub ticks: u64,
    pub tasks: BTreeMap<u32, u64>,
}

pub fn cpu_sample(pid: u32) -> Result<CpuSample> {
    Ok(CpuSample {
        at: Instant::now(),
        ticks: cpu_ticks(pid).ok_or_else(|| anyhow!("read /proc/{pid}/stat"))?,
        tasks: task_ns(pid),
    })
}

#[derive(Debug, Clone, Copy)]
pub struct CpuDelta {
    pub wall_s: f64,
    /// From utime+stime (resolution: one clock tick).
    pub stat_ms: f64,
    /// From per-thread schedstat (ns; threads that exited inside the window
    /// are missing).
    pub sched_ms: f64,
    pub exited_threads: usize,
}

pub fn cpu_delta(a: &CpuSample, b: &CpuSample) -> CpuDelta {
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

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

pub fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Nearest-rank percentile of sorted values.
pub fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub n: usize,
    pub p50: f64,
    pub p95: f64,
    pub max: f64,
}

pub fn summarize(values: &[f64]) -> Summary {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    Summary {
        n: v.len(),
        p50: pct(&v, 50.0),
        p95: pct(&v, 95.0),
        max: v.last().copied().unwrap_or(f64::NAN),
    }
}

pub fn summary_ms(values: &[f64]) -> Value {
    let s = summarize(values);
    json!({
        "n": s.n,
        "p50Ms": r1(s.p50),
        "p95Ms": r1(s.p95),
        "maxMs": r1(s.max),
    })
}

/// Several teardown reports as one.
pub fn teardowns(all: &[Value]) -> Value {
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

pub fn mb(kb: Option<u64>) -> Value {
    kb.map_or(Value::Null, |k| json!(r1(k as f64 / 1024.0)))
}

pub fn progress(msg: impl AsRef<str>) {
    eprintln!("[steward-bench] {}", msg.as_ref());
}

pub fn target(value: Value, target: &str, met: Option<bool>) -> Value {
    json!({ "value": value, "target": target, "met": met })
}

/// (busy, total) jiffies of the whole machine from /proc/stat.
pub fn machine_jiffies() -> Option<(u64, u64)> {
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

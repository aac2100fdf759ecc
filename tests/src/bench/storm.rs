//! Scenario `storm` of `steward-bench`: one server that announces
//! `notifications/tools/list_changed` far faster than it should be re-listed
//! (1000 a second for 10 s; quick: 2 s), offering the same 200 tools all
//! along and one tool fewer at the very end.
//!
//! How it measures: the fake starts its storm a few seconds after
//! `notifications/initialized` and records its `begin` and `end`; the bench
//! follows the fake's record file (reading only what was appended, every
//! 50 ms; no socket client exists meanwhile) and samples the controller's
//! CPU when it sees the `begin`, when it sees the `end`, and once no
//! `tools/list` has arrived for [`QUIET`] (a controller that queued the
//! notifications goes on re-listing after the storm). Re-lists are the
//! `tools/list` requests the fake received after `begin` (a multi-page
//! listing would count once per page; the fake serves one page). At the end
//! one `status` request says whether the last list is the one shown.

use super::*;

/// No re-list for this long after the storm: the controller is done with it.
const QUIET: Duration = Duration::from_secs(1);
/// Bound on the wait for a controller still re-listing after the storm.
const AFTERMATH: Duration = Duration::from_secs(180);
/// The storm begins this long after `notifications/initialized`: the
/// controller is Ready and settled by then.
const STORM_AFTER: Duration = Duration::from_secs(3);

pub struct Storm {
    pub json: Value,
    pub targets: serde_json::Map<String, Value>,
}

pub fn storm(ctx: &Ctx) -> Result<Storm> {
    let (rate, duration, n_tools) = (
        ctx.plan.storm_per_second,
        ctx.plan.storm_duration,
        ctx.plan.storm_tools,
    );
    progress(format!(
        "storm: {rate} list_changed/s for {duration:?}, {n_tools} tools"
    ));
    let tools: Vec<String> = (0..n_tools).map(|i| format!("tool{i:03}")).collect();
    let at_end = tools[..n_tools.saturating_sub(1)].to_vec();
    let base = FakeMcpConfig {
        tools: tools.clone(),
        list_changed_storm: Some(fake_mcp::ListChangedStorm {
            per_second: rate,
            duration_ms: duration.as_millis() as u64,
            after_ms: STORM_AFTER.as_millis() as u64,
            tools_at_end: Some(at_end.clone()),
        }),
        ..FakeMcpConfig::default()
    };
    let r = start_steward_with(ctx, 1, false, &base, &[])?;
    let pid = r.stw.pid;
    let name = r.fleet.names[0].clone();
    let mut tail = RecordTail::new(r.fleet.record(0));

    let deadline = Instant::now() + STORM_AFTER + DEADLINE;
    let begin = tail.wait(deadline, Duration::from_millis(2), |e| {
        storm_phase(e, "begin")
    })?;
    let a = cpu_sample(pid)?;
    let deadline = Instant::now() + duration + DEADLINE;
    let end = tail.wait(deadline, Duration::from_millis(50), |e| {
        storm_phase(e, "end")
    })?;
    let b = cpu_sample(pid)?;
    // The aftermath: until no re-list has come for QUIET.
    let deadline = Instant::now() + AFTERMATH;
    let mut last_seen = Instant::now();
    let mut last_count = tail.relists.len();
    while last_seen.elapsed() < QUIET {
        if Instant::now() > deadline {
            bail!("still re-listing {AFTERMATH:?} after the storm");
        }
        std::thread::sleep(Duration::from_millis(50));
        tail.read_new();
        if tail.relists.len() != last_count {
            last_count = tail.relists.len();
            last_seen = Instant::now();
        }
    }
    let c = cpu_sample(pid)?;
    let storm_cpu = cpu_delta(&a, &b);
    let after_cpu = cpu_delta(&b, &c);
    let total_cpu = cpu_delta(&a, &c);

    let during = tail
        .relists
        .iter()
        .filter(|t| (begin.t..=end.t).contains(t))
        .count();
    let after = tail.relists.iter().filter(|t| **t > end.t).count();
    let total = during + after;
    let last_after_end_ms = tail
        .relists
        .last()
        .map(|t| t.saturating_sub(end.t))
        .filter(|_| after > 0);
    let status = r.stw.status()?;
    let shown = mcp(&status, &name).and_then(|m| m.status.tools.clone());
    let final_seen = shown.as_deref() == Some(&at_end[..]);

    let sched_complete = storm_cpu.exited_threads == 0;
    let pct = |d: &CpuDelta, sched: bool| {
        let ms = if sched { d.sched_ms } else { d.stat_ms };
        ms / 10.0 / d.wall_s
    };
    let storm_pct = pct(&storm_cpu, sched_complete);
    let sent = end.message["sent"].as_u64().unwrap_or(0);
    let json = json!({
        "perSecond": rate,
        "durationMs": duration.as_millis() as u64,
        "tools": n_tools,
        "notificationsSent": sent,
        "stormWallS": r3(storm_cpu.wall_s),
        "cpuPctDuringStorm": r3(storm_pct),
        "cpuPctDuringStormStat": r3(pct(&storm_cpu, false)),
        "cpuPctDuringStormSchedstat": r3(pct(&storm_cpu, true)),
        "cpuSource": if sched_complete { "schedstat" } else { "stat" },
        "relistsDuringStorm": during,
        "relistsAfterStorm": after,
        "relists": total,
        "lastRelistAfterEndMs": last_after_end_ms,
        "aftermathS": r3(after_cpu.wall_s),
        "cpuMsAfterStorm": r1(if sched_complete { after_cpu.sched_ms } else { after_cpu.stat_ms }),
        "cpuMsTotal": r1(if sched_complete { total_cpu.sched_ms } else { total_cpu.stat_ms }),
        "finalListShown": final_seen,
        "toolsShownAtEnd": shown.as_ref().map(Vec::len),
        "teardown": r.finish(),
    });
    let mut targets = serde_json::Map::new();
    targets.insert(
        "stormCpuPct".into(),
        target(json!(r3(storm_pct)), "<= 2", Some(storm_pct <= 2.0)),
    );
    // Only the full storm (10 s) is held to its count; a quick one is shorter.
    targets.insert(
        "stormRelists".into(),
        target(
            json!(total),
            "<= 50",
            (!ctx.opts.quick).then_some(total <= 50),
        ),
    );
    targets.insert(
        "stormFinalListShown".into(),
        target(json!(final_seen), "true", Some(final_seen)),
    );
    Ok(Storm { json, targets })
}

fn storm_phase(e: &fake_mcp::RecordEvent, phase: &str) -> bool {
    e.event == "storm" && e.message["phase"] == phase
}

/// Follows a record file, parsing only what was appended since the last
/// read (the storm's record grows by thousands of lines).
struct RecordTail {
    path: PathBuf,
    offset: u64,
    partial: String,
    /// `t` of every `tools/list` received since the storm began.
    relists: Vec<u64>,
    begun: bool,
    /// Events that matched a [`RecordTail::wait`], not yet returned.
    seen: Vec<fake_mcp::RecordEvent>,
}

impl RecordTail {
    fn new(path: PathBuf) -> RecordTail {
        RecordTail {
            path,
            offset: 0,
            partial: String::new(),
            relists: Vec::new(),
            begun: false,
            seen: Vec::new(),
        }
    }

    fn read_new(&mut self) {
        use std::io::{Seek, SeekFrom};
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return;
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut text = String::new();
        let Ok(n) = file.read_to_string(&mut text) else {
            return;
        };
        self.offset += n as u64;
        self.partial.push_str(&text);
        let complete = match self.partial.rfind('\n') {
            Some(i) => {
                let rest = self.partial.split_off(i + 1);
                std::mem::replace(&mut self.partial, rest)
            }
            None => return,
        };
        for line in complete.lines() {
            let Ok(e) = serde_json::from_str::<fake_mcp::RecordEvent>(line) else {
                continue;
            };
            if storm_phase(&e, "begin") {
                self.begun = true;
            }
            if self.begun && e.event == "recv" && e.method() == Some("tools/list") {
                self.relists.push(e.t);
            }
            if e.event == "storm" {
                self.seen.push(e);
            }
        }
    }

    /// Reads every `every` until an event matches `pred`.
    fn wait(
        &mut self,
        deadline: Instant,
        every: Duration,
        pred: impl Fn(&fake_mcp::RecordEvent) -> bool,
    ) -> Result<fake_mcp::RecordEvent> {
        loop {
            self.read_new();
            if let Some(i) = self.seen.iter().position(&pred) {
                return Ok(self.seen.remove(i));
            }
            if Instant::now() > deadline {
                bail!(
                    "{}: the storm's record did not show up",
                    self.path.display()
                );
            }
            std::thread::sleep(every);
        }
    }
}

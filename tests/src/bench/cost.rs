//! Scenario `cost` of `steward-bench`: controller cost (CPU per edit, idle
//! CPU).

use super::*;

pub struct CostLevel {
    pub n: usize,
    pub json: Value,
    pub per_edit_stat_ms: f64,
    pub per_edit_net_ms: f64,
    pub per_edit_sched_ms: f64,
    /// Schedstat (ns) when no thread exited in the windows, else stat (ticks).
    pub per_edit_best_ms: f64,
    /// The same, less the idle rate over the edit window (the edit's own work).
    pub per_edit_best_net_ms: f64,
    pub idle_pct_best: f64,
    pub best_source: &'static str,
    pub idle_window_s: f64,
    pub unchanged: usize,
    /// The controller's peak and current resident memory at the end (KB).
    pub hwm_kb: Option<u64>,
    pub rss_kb: Option<u64>,
}

pub fn cost_level(ctx: &Ctx, n: usize, idle_window: Duration) -> Result<CostLevel> {
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
    let rss = status_kb(pid, "VmRSS:");
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
        "rssMb": mb(rss),
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
        hwm_kb: hwm,
        rss_kb: rss,
    })
}

//! Scenario `reload` of `steward-bench`: reload latency, churn, debounce,
//! reorder-only edit.

use super::*;

pub struct ReloadLevel {
    pub n: usize,
    pub json: Value,
    pub ready: Vec<f64>,
    pub applied: Vec<f64>,
    pub unchanged_restarts: usize,
    pub hwm_kb: Option<u64>,
}

pub fn reload_level(ctx: &Ctx, n: usize, probes: usize) -> Result<ReloadLevel> {
    reload_level_with(ctx, n, probes, &[])
}

/// [`reload_level`] with `vars` in the controller's environment.
pub fn reload_level_with(
    ctx: &Ctx,
    n: usize,
    probes: usize,
    vars: &[(&str, &str)],
) -> Result<ReloadLevel> {
    progress(format!("reload: {n} servers, {} edits", ctx.plan.edits));
    let mut r = start_steward_full(ctx, n, true, &FakeMcpConfig::default(), &[], vars)?;
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

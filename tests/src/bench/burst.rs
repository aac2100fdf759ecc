//! Scenario `burst` of `steward-bench`: a burst of saves to one server.

use super::*;

pub struct Burst {
    pub json: Value,
    pub restarts: usize,
    pub unchanged: usize,
}

pub fn burst(ctx: &Ctx) -> Result<Burst> {
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

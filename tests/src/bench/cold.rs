//! Scenario `cold` of `steward-bench`: cold start.

use super::*;

pub struct Cold {
    pub json: Value,
    /// Without a socket client during the start (the method used for mcp-hub).
    pub all_ready: Vec<f64>,
    pub with_watch: Vec<f64>,
    pub hwm_kb: Vec<u64>,
}

pub fn cold(ctx: &Ctx) -> Result<Cold> {
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

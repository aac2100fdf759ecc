//! Scenario `restarts` of `steward-bench`: an agent's session across
//! controller restarts. One fake server; an rmcp client runs `steward mcp`
//! attached to a `steward run` and keeps [`CALLERS`] calls going all the
//! time (each sleeps [`CALL_SLEEP_MS`] in the server, so some are always in
//! flight). The controller is restarted 20 times gracefully (SIGTERM, then a
//! new `steward run` at once, as an upgrade does) and killed 5 times
//! (SIGKILL, then a new one), each time after the client has made
//! [`CALLS_BETWEEN`] more successful calls. A call is lost when it errs or
//! gets no answer within [`CALL_TIMEOUT`]. Graceful stops hand the session
//! back after answering what they read (target: none lost); the calls a
//! killed controller was serving are answered at once with an error by
//! `steward mcp` (a call it had read but not yet recorded would time out),
//! and the next ones are served.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;

use super::*;

const CALLERS: usize = 4;
const CALL_SLEEP_MS: u64 = 20;
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
const CALLS_BETWEEN: usize = 20;

#[derive(Default)]
struct Counts {
    ok: AtomicUsize,
    errors: AtomicUsize,
    timeouts: AtomicUsize,
}

impl Counts {
    fn lost(&self) -> usize {
        self.errors.load(Ordering::Relaxed) + self.timeouts.load(Ordering::Relaxed)
    }
}

/// Calls `tool` until `stop`, counting outcomes.
async fn caller(
    client: Arc<RunningService<RoleClient, ()>>,
    tool: String,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        let mut args = serde_json::Map::new();
        args.insert("sleepMs".into(), json!(CALL_SLEEP_MS));
        let call = client
            .peer()
            .call_tool(CallToolRequestParams::new(tool.clone()).with_arguments(args));
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(result)) if result.is_error != Some(true) => {
                counts.ok.fetch_add(1, Ordering::Relaxed);
            }
            Ok(_) => {
                counts.errors.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                counts.timeouts.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Wait until `counts` has `more` successful calls than `from`.
fn wait_calls(counts: &Counts, from: usize, more: usize) -> Result<usize> {
    let deadline = Instant::now() + DEADLINE * 2;
    loop {
        let ok = counts.ok.load(Ordering::Relaxed);
        if ok >= from + more {
            return Ok(ok);
        }
        if Instant::now() > deadline {
            bail!("the calls stopped going through ({ok} successful)");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub(super) fn restarts(ctx: &Ctx) -> Result<(Value, serde_json::Map<String, Value>)> {
    let (graceful, killed) = if ctx.opts.quick { (3, 1) } else { (20, 5) };
    let base = FakeMcpConfig {
        tools: vec!["t".into()],
        ..FakeMcpConfig::default()
    };
    let mut r = start_steward_with(ctx, 1, false, &base, &[])?;
    let tool = format!("{}__t", r.fleet.names[0]);
    let env = &r.sb.env;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (mut child, client, reg) = rt.block_on(agent(ctx, env, ()))?;
    let client = Arc::new(client);
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            rt.spawn(caller(
                client.clone(),
                tool.clone(),
                counts.clone(),
                stop.clone(),
            ))
        })
        .collect();

    let mut ok = wait_calls(&counts, 0, CALLS_BETWEEN)?;
    let mut restart_ms = Vec::new();
    for (round, kill) in (0..graceful)
        .map(|_| false)
        .chain((0..killed).map(|_| true))
        .enumerate()
    {
        progress(format!(
            "restarts: {} {}",
            if kill { "SIGKILL" } else { "SIGTERM" },
            round + 1
        ));
        let lost_before = counts.lost();
        let t0 = Instant::now();
        if kill {
            if let Some(mut c) = r.stw.child.take() {
                let _ = c.kill();
                let _ = c.wait();
                unregister(r.stw.reg);
            }
        } else if r.stw.terminate() != Some(true) {
            bail!("the controller did not stop cleanly:\n{}", r.stw.log_tail());
        }
        r.stw = Stw::spawn(ctx, env, &[])?;
        ok = wait_calls(&counts, ok, CALLS_BETWEEN)?;
        restart_ms.push((kill, ms(t0.elapsed()), counts.lost() - lost_before));
    }
    stop.store(true, Ordering::Relaxed);
    for c in callers {
        let _ = rt.block_on(c);
    }
    let total = counts.ok.load(Ordering::Relaxed) + counts.lost();
    let lost = |kill: bool| -> usize {
        restart_ms
            .iter()
            .filter(|(k, _, _)| *k == kill)
            .map(|(_, _, l)| l)
            .sum()
    };
    let gap = |kill: bool| -> Vec<f64> {
        restart_ms
            .iter()
            .filter(|(k, _, _)| *k == kill)
            .map(|(_, t, _)| *t)
            .collect()
    };
    let (lost_graceful, lost_killed) = (lost(false), lost(true));
    let closed = rt.block_on(async {
        let client = Arc::try_unwrap(client).ok();
        if let Some(client) = client {
            let _ = client.cancel().await;
        }
        tokio::time::timeout(DEADLINE, child.wait()).await
    });
    unregister(reg);
    let mut targets = serde_json::Map::new();
    targets.insert(
        "callsLostOverGracefulRestarts".into(),
        target(json!(lost_graceful), "0", Some(lost_graceful == 0)),
    );
    Ok((
        json!({
            "callers": CALLERS,
            "callSleepMs": CALL_SLEEP_MS,
            "callTimeoutMs": CALL_TIMEOUT.as_millis() as u64,
            "calls": total,
            "graceful": {
                "restarts": graceful,
                "callsLost": lost_graceful,
                "stopToCallsFlowingAgainMs": summary_ms(&gap(false)),
            },
            "sigkill": {
                "kills": killed,
                "callsLost": lost_killed,
                "errors": counts.errors.load(Ordering::Relaxed),
                "timeouts": counts.timeouts.load(Ordering::Relaxed),
                "killToCallsFlowingAgainMs": summary_ms(&gap(true)),
                "why": "a killed controller cannot finish the requests it was serving: steward mcp answers each at once with an error (errors); a request it had read but not yet recorded in its ledger gets no answer (timeouts)",
            },
            "stewardMcpExitedAfterTheAgentLeft": matches!(closed, Ok(Ok(s)) if s.success()),
        }),
        targets,
    ))
}

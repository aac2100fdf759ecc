//! Scenarios `readiness` and `gate` of `steward-bench`: readiness is
//! observed, not awaited (a server's handshake holds up neither the
//! controller nor the other servers).
//!
//! - `readiness`: cold start to all Ready at each `--cold-ns` with fakes that
//!   answer `initialize` after `--init-delay-ms` and burn `--start-cpu-ms`
//!   of CPU at start, steward and mcp-hub alternately on the same fakes; the
//!   time one such server takes (N = 1) and the machine's CPU cost of a
//!   start, for the N = 100 bound; then, on the largest run: idle CPU, the
//!   controller-side time of one `status` request, the CLI's
//!   `status -o json`, and the stop (SIGTERM) of the whole fleet.
//! - `gate`: two Ready servers, then 50 servers whose `initialize` takes 5 s
//!   are added; while they start, one Ready server is excluded (timed to
//!   its process's exit) and the other's args are edited (timed to Ready
//!   with a new pid).

use super::*;

/// The fake of these scenarios: an `npx`-like start.
fn npx_like(ctx: &Ctx) -> FakeMcpConfig {
    FakeMcpConfig {
        initialize_delay_ms: ctx.opts.init_delay_ms,
        start_cpu_ms: ctx.opts.start_cpu_ms,
        ..FakeMcpConfig::default()
    }
}

/// Busy jiffies of the whole machine (all processes) and the core count.
fn machine_busy_s() -> Option<f64> {
    machine_jiffies().map(|(busy, _)| busy as f64 / clk_tck() as f64)
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One cold start of steward: time to all Ready and the machine's CPU (s).
fn steward_cold(ctx: &Ctx, n: usize) -> Result<(Running, f64, Option<f64>)> {
    let b0 = machine_busy_s();
    let r = start_steward_with(ctx, n, false, &npx_like(ctx), &[])?;
    let cpu = b0.zip(machine_busy_s()).map(|(a, b)| b - a);
    let cold = r.cold_ms;
    Ok((r, cold, cpu))
}

/// `status` over the control socket from a client already running: connect,
/// one request line, the whole answer read. Returns (ms, answer bytes).
fn status_round_trip(socket: &Path) -> Result<(f64, usize)> {
    let mut line = serde_json::to_vec(&Request::Status)?;
    line.push(b'\n');
    let t0 = Instant::now();
    let mut stream = UnixStream::connect(socket)?;
    stream.write_all(&line)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let d = ms(t0.elapsed());
    if !answer.starts_with(b"{") {
        bail!("not a status answer: {}", String::from_utf8_lossy(&answer));
    }
    Ok((d, answer.len()))
}

/// `steward status -o json` as a user runs it (process start included).
fn status_cli(ctx: &Ctx, env: &Env) -> Result<f64> {
    let vars = env.quiet_vars();
    let t0 = Instant::now();
    let out = Command::new(&ctx.steward)
        .arg("--workspace")
        .arg(&env.ws)
        .args(["status", "-o", "json"])
        .env_clear()
        .envs(base_env())
        .envs(vars)
        .stdin(Stdio::null())
        .output()
        .context("run steward status -o json")?;
    let d = ms(t0.elapsed());
    if !out.status.success() {
        bail!(
            "status -o json: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(d)
}

/// SIGTERM the controller of `r`; returns (ms to its exit, ms until every
/// fake it ran is gone, exited cleanly, fakes left).
fn stop_fleet(r: &mut Running) -> Result<Value> {
    let fakes: Vec<u32> = r.baseline.values().filter_map(|p| *p).collect();
    let mut child = r.stw.child.take().ok_or_else(|| anyhow!("no controller"))?;
    let limit = Duration::from_secs(30);
    let t0 = Instant::now();
    signal(child.id() as i32, libc::SIGTERM);
    let mut exited = None;
    let mut fakes_gone = None;
    while t0.elapsed() < limit && (exited.is_none() || fakes_gone.is_none()) {
        if exited.is_none()
            && let Ok(Some(status)) = child.try_wait()
        {
            exited = Some((ms(t0.elapsed()), status.success()));
        }
        if fakes_gone.is_none() && fakes.iter().all(|p| !alive(*p) || !is_fake(*p)) {
            fakes_gone = Some(ms(t0.elapsed()));
        }
        // The sampling interval of the stop's clock.
        std::thread::sleep(Duration::from_millis(1));
    }
    if exited.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    unregister(r.stw.reg);
    let left = r.sb.reap_fakes();
    Ok(json!({
        "servers": fakes.len(),
        "sigtermToControllerExitMs": exited.map(|e| r1(e.0)),
        "sigtermToEveryFakeGoneMs": fakes_gone.map(r1),
        "exitedCleanly": exited.map(|e| e.1),
        "fakesLeftRunningAndKilled": left,
    }))
}

pub(super) struct Readiness {
    pub json: Value,
    pub targets: serde_json::Map<String, Value>,
}

pub(super) fn readiness(ctx: &Ctx) -> Result<Readiness> {
    let quick = ctx.opts.quick;
    let ns = ctx
        .opts
        .cold_ns
        .clone()
        .unwrap_or_else(|| if quick { vec![10] } else { vec![10, 100, 500] });
    let hub_exe = if ctx.opts.no_mcp_hub {
        None
    } else {
        Some(mcp_hub::find_mcp_hub(&ctx.opts)?.0)
    };
    let repeats = |n: usize| if quick || n >= 500 { 1 } else { 3 };
    let mut out = serde_json::Map::new();
    let mut targets = serde_json::Map::new();

    // The time one server takes, alone.
    let mut one = Vec::new();
    for rep in 0..repeats(1) {
        progress(format!("readiness: 1 server (run {})", rep + 1));
        let (r, cold, _) = steward_cold(ctx, 1)?;
        one.push(cold);
        r.finish();
    }
    let one_ms = summarize(&one).p50;
    out.insert("oneServerSpawnToReady".into(), summary_ms(&one));

    let largest = ns.iter().copied().max().unwrap_or(0);
    for &n in &ns {
        let (mut stw_ms, mut hub_ms, mut cpu_s) = (vec![], vec![], vec![]);
        let (mut stw_cpu, mut hub_cpu) = (vec![], vec![]);
        let secs = |ticks: Option<u64>| ticks.map(|t| t as f64 / clk_tck() as f64);
        let mut hub_err = None;
        let mut kept = None;
        for rep in 0..repeats(n) {
            // mcp-hub first: the last steward run of the largest N stays up
            // for the steady-state figures and must not overlap it.
            if let Some(exe) = &hub_exe {
                progress(format!(
                    "readiness: mcp-hub cold start, {n} servers (run {})",
                    rep + 1
                ));
                match mcp_hub::start_hub_with(exe, ctx, n, &npx_like(ctx)) {
                    Ok(mut h) => {
                        hub_ms.push(h.cold_ms);
                        hub_cpu.extend(secs(cpu_ticks(h.hub.pid)));
                        h.hub.terminate();
                        h.sb.reap_fakes();
                    }
                    Err(e) => hub_err = Some(format!("{e:#}")),
                }
            }
            progress(format!(
                "readiness: steward cold start, {n} servers (run {})",
                rep + 1
            ));
            let (r, cold, cpu) = steward_cold(ctx, n)?;
            stw_ms.push(cold);
            cpu_s.extend(cpu);
            stw_cpu.extend(secs(cpu_ticks(r.stw.pid)));
            if n == largest && rep + 1 == repeats(n) {
                kept = Some(r);
            } else {
                r.finish();
            }
        }
        let (s, cpu) = (summarize(&stw_ms).p50, summarize(&cpu_s).p50);
        let mut level = json!({
            "servers": n,
            "runs": stw_ms.len(),
            "stewardSpawnToAllReady": summary_ms(&stw_ms),
            "machineCpuDuringStartS": r3(cpu),
            "controllerCpuDuringStartS": r3(summarize(&stw_cpu).p50),
        });
        if !hub_ms.is_empty() {
            let m = summarize(&hub_ms).p50;
            level["mcpHubSpawnToAllConnected"] = summary_ms(&hub_ms);
            level["mcpHubCpuDuringStartS"] = json!(r3(summarize(&hub_cpu).p50));
            level["ratioP50"] = json!(r3(s / m));
            targets.insert(
                format!("coldStartN{n}VsMcpHub"),
                target(
                    json!({"stewardMs": r1(s), "mcpHubMs": r1(m), "ratio": r3(s / m)}),
                    "<= 0.5",
                    Some(s / m <= 0.5),
                ),
            );
        }
        if let Some(e) = hub_err {
            level["mcpHubError"] = json!(e);
        }
        if n == 100 {
            // The bound: one server's time plus the start's CPU spread over the cores.
            let bound = 1.5 * (one_ms + 1000.0 * cpu / cores() as f64);
            targets.insert(
                "coldStartN100VsOneServerPlusCpu".into(),
                target(
                    json!({"stewardMs": r1(s), "oneServerMs": r1(one_ms),
                           "machineCpuS": r3(cpu), "cores": cores(), "boundMs": r1(bound)}),
                    "<= 1.5 x (one server + machine CPU / cores)",
                    Some(s <= bound),
                ),
            );
        }
        out.insert(format!("n{n}"), level);
        if let Some(mut r) = kept {
            let big = steady_state(ctx, &mut r, &mut targets)?;
            out.insert(format!("steadyN{n}"), big);
        }
    }
    out.insert(
        "fake".into(),
        json!({"initializeDelayMs": ctx.opts.init_delay_ms, "startCpuMs": ctx.opts.start_cpu_ms}),
    );
    out.insert(
        "how".into(),
        json!(
            "cold start as in coldStart (no client until every fake answered tools/list, \
               then status polled; mcp-hub: record files, then GET /api/servers), both polled \
               every max(5 ms, N x 0.1 ms); machine CPU is the busy jiffies of all processes \
               during the steward start"
        ),
    );
    Ok(Readiness {
        json: Value::Object(out),
        targets,
    })
}

/// Idle CPU, status time and stop, on a fleet that is all Ready.
fn steady_state(
    ctx: &Ctx,
    r: &mut Running,
    targets: &mut serde_json::Map<String, Value>,
) -> Result<Value> {
    let n = r.fleet.len();
    let (settle, window) = if ctx.opts.quick {
        (Duration::from_secs(1), Duration::from_secs(3))
    } else {
        (Duration::from_secs(5), 2 * PING_PERIOD)
    };
    progress(format!(
        "readiness: idle CPU, {n} servers, {:.0} s",
        window.as_secs_f64()
    ));
    std::thread::sleep(settle);
    let a = cpu_sample(r.stw.pid)?;
    // The measurement window itself.
    std::thread::sleep(window);
    let b = cpu_sample(r.stw.pid)?;
    let d = cpu_delta(&a, &b);
    let (idle_ms, source) = if d.exited_threads == 0 {
        (d.sched_ms, "schedstat")
    } else {
        (d.stat_ms, "stat")
    };
    let idle_pct = 100.0 * idle_ms / 1000.0 / d.wall_s;
    targets.insert(
        format!("idleCpuPctN{n}"),
        target(
            json!(r3(idle_pct)),
            "<= 0.05",
            (window >= PING_PERIOD).then_some(idle_pct <= 0.05),
        ),
    );

    progress(format!("readiness: status at {n} servers"));
    let samples = if ctx.opts.quick { 20 } else { 200 };
    let (mut rtt, mut bytes) = (Vec::new(), 0);
    let c0 = cpu_sample(r.stw.pid)?;
    for _ in 0..samples {
        let (d, b) = status_round_trip(&r.stw.socket)?;
        rtt.push(d);
        bytes = b;
    }
    let c1 = cpu_sample(r.stw.pid)?;
    let cpu_per = cpu_delta(&c0, &c1);
    let per_request_cpu = cpu_per.sched_ms / samples as f64;
    let mut cli = Vec::new();
    for _ in 0..if ctx.opts.quick { 2 } else { 10 } {
        cli.push(status_cli(ctx, &r.sb.env)?);
    }
    let p50 = summarize(&rtt).p50;
    targets.insert(
        format!("statusJsonN{n}ControllerMs"),
        target(
            json!({"roundTripP50Ms": r3(p50), "controllerCpuMsPerRequest": r3(per_request_cpu)}),
            "<= 5",
            Some(p50 <= 5.0),
        ),
    );

    progress(format!("readiness: stop of {n} servers"));
    let stop = stop_fleet(r)?;
    let grace_ms = 3000.0;
    let worst = stop["sigtermToControllerExitMs"]
        .as_f64()
        .unwrap_or(f64::INFINITY)
        .max(
            stop["sigtermToEveryFakeGoneMs"]
                .as_f64()
                .unwrap_or(f64::INFINITY),
        );
    targets.insert(
        format!("stopN{n}Ms"),
        target(
            json!(r1(worst)),
            "<= grace (3 s) + 1 s",
            Some(worst <= grace_ms + 1000.0),
        ),
    );
    Ok(json!({
        "servers": n,
        "idle": {"windowS": r3(d.wall_s), "cpuPct": r3(idle_pct), "cpuMs": r3(idle_ms),
                 "source": source, "settleS": settle.as_secs()},
        "statusRequest": {
            "samples": samples,
            "roundTrip": summary_ms(&rtt),
            "answerBytes": bytes,
            "controllerCpuMsPerRequest": r3(per_request_cpu),
            "how": "a client already running: connect to the control socket, one Status \
                    line, read the answer to EOF (std, blocking)",
        },
        "statusJsonCli": summary_ms(&cli),
        "stop": stop,
    }))
}

/// With 50 slow servers starting: exclude a Ready server, edit another's args.
pub(super) fn gate(ctx: &Ctx) -> Result<(Value, serde_json::Map<String, Value>)> {
    let slow_n = if ctx.opts.quick { 10 } else { 50 };
    let slow_ms = 5000;
    let sb = GuardedEnv::new();
    let settings = sb.env.home.join("settings.json");
    let mut fleet = Fleet::with(&ctx.fake, &sb.env.records(), 0, &FakeMcpConfig::default());
    fleet.push("ready-a", &FakeMcpConfig::default());
    let b = fleet.push("ready-b", &FakeMcpConfig::default());
    fleet.config_in_args.insert(b);
    write_by_rename(&settings, &fleet.content(false), 0)?;
    let mut stw = Stw::spawn(ctx, &sb.env, &[])?;
    let mut obs = stw.observe(Observe::Watch)?;
    let (_, s) = obs.wait("two servers Ready", |_, s| all_ready(s, &fleet))?;
    let pid_of = |s: &WorkspaceStatus, name: &str| mcp(s, name).and_then(|m| m.status.pid);
    let (pid_a, pid_b) = (
        pid_of(&s, "ready-a").ok_or_else(|| anyhow!("no pid for ready-a"))?,
        pid_of(&s, "ready-b"),
    );

    progress(format!(
        "gate: {slow_n} servers with a {slow_ms} ms initialize"
    ));
    let slow = FakeMcpConfig {
        initialize_delay_ms: slow_ms,
        ..FakeMcpConfig::default()
    };
    let slow_idx: Vec<usize> = (0..slow_n)
        .map(|i| fleet.push(&format!("slow{i:02}"), &slow))
        .collect();
    let t_add = write_by_rename(&settings, &fleet.content(false), 1)?;
    // Every slow fake started (its process runs, its initialize is pending).
    let deadline = Instant::now() + DEADLINE;
    while !slow_idx.iter().all(|&i| !fleet.starts_of(i).is_empty()) {
        if Instant::now() > deadline {
            bail!("the slow servers did not start within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let all_spawned_ms = ms(t_add.elapsed());
    sleep_until(ctx.next_edit_at(t_add));

    progress("gate: exclude ready-a");
    fleet.excluded.insert("ready-a".into());
    let t_x = write_by_rename(&settings, &fleet.content(false), 2)?;
    let limit = Instant::now() + DEADLINE;
    let exit_ms = loop {
        if !alive(pid_a) {
            break ms(t_x.elapsed());
        }
        if Instant::now() > limit {
            bail!("ready-a (pid {pid_a}) still runs {DEADLINE:?} after its exclusion");
        }
        std::hint::spin_loop();
        std::thread::sleep(Duration::from_micros(200));
    };
    let (t_seen, s) = obs.wait("ready-a not Ready", |_, s| {
        mcp(s, "ready-a").is_none_or(|m| m.status.phase != Phase::Ready)
    })?;
    let slow_ready = |s: &WorkspaceStatus| {
        slow_idx
            .iter()
            .filter(|&&i| mcp(s, &fleet.names[i]).is_some_and(fresh_ready))
            .count()
    };
    let slow_ready_at_exclusion = slow_ready(&s);
    let status_ms = ms(t_seen - t_x);
    sleep_until(ctx.next_edit_at(t_x));

    progress("gate: edit ready-b's args");
    fleet.configs[b].version = "0.2.0".into();
    let t_b = write_by_rename(&settings, &fleet.content(false), 3)?;
    let (t_ready, s) = obs.wait("ready-b Ready with a new pid", |_, s| {
        mcp(s, "ready-b").is_some_and(|m| fresh_ready(m) && m.status.pid != pid_b)
    })?;
    let args_ms = ms(t_ready - t_b);
    let slow_ready_at_args = slow_ready(&s);
    let since_add_ms = ms(t_ready - t_add);
    drop(obs);
    let clean = stw.terminate();
    let left = sb.reap_fakes();
    let mut targets = serde_json::Map::new();
    targets.insert(
        format!("gateExclusionWith{slow_n}SlowMs"),
        target(
            json!({"writeToProcessExitMs": r1(exit_ms), "writeToStatusMs": r1(status_ms)}),
            "writeToProcessExitMs <= 100",
            Some(exit_ms <= 100.0),
        ),
    );
    targets.insert(
        format!("gateArgsEditWith{slow_n}SlowMs"),
        target(
            json!({"writeToReadyMs": r1(args_ms), "slowReadyAtThatTime": slow_ready_at_args}),
            "Ready before the slow servers (slowReadyAtThatTime == 0)",
            Some(slow_ready_at_args == 0),
        ),
    );
    Ok((
        json!({
            "slowServers": slow_n,
            "slowInitializeMs": slow_ms,
            "addWriteToEverySlowProcessStartedMs": r1(all_spawned_ms),
            "exclusion": {
                "writeToProcessExitMs": r1(exit_ms),
                "writeToStatusNotReadyMs": r1(status_ms),
                "slowReadyAtThatTime": slow_ready_at_exclusion,
            },
            "argsEdit": {
                "writeToReadyNewPidMs": r1(args_ms),
                "addWriteToThisReadyMs": r1(since_add_ms),
                "slowReadyAtThatTime": slow_ready_at_args,
            },
            "teardown": {"controllerExitedCleanly": clean, "fakesLeftRunningAndKilled": left},
            "how": "two fast servers Ready; the slow ones added in one write; once every slow \
                    process has started (record files), ready-a is excluded (mcp.excluded; its \
                    pid polled every 0.2 ms) and then ready-b's args (--config=...) edited \
                    (watch stream)",
        }),
        targets,
    ))
}

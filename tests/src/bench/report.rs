//! The run of `steward-bench`: the machine, every scenario asked for, and
//! the JSON summary with its targets.

use super::*;

pub fn machine() -> Value {
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

pub fn git() -> Value {
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
pub fn newer_sources(binary: &Path) -> Vec<String> {
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

pub fn unix_s(t: std::io::Result<SystemTime>) -> Option<u64> {
    t.ok()?
        .duration_since(SystemTime::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

/// Machine-wide CPU busy % per scenario (the bench, its controller and
/// fakes included): a high figure where the scenario itself is light means
/// something else ran on the machine during it.
pub static MACHINE_BUSY: Mutex<Vec<(String, f64, f64)>> = Mutex::new(Vec::new());

/// A scenario's JSON, its targets added to `targets` (or the JSON of its
/// failure).
fn with_targets(
    targets: &mut serde_json::Map<String, Value>,
    outcome: Result<(Value, serde_json::Map<String, Value>), Value>,
) -> Value {
    match outcome {
        Ok((json, t)) => {
            targets.extend(t);
            json
        }
        Err(e) => e,
    }
}

pub fn run_scenario<T>(name: &str, f: impl FnOnce() -> Result<T>) -> Result<T, Value> {
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

pub fn bench(opts: Opts) -> Result<()> {
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

    let mut levels: Vec<reload::ReloadLevel> = Vec::new();
    if on("reload") {
        let mut reload = serde_json::Map::new();
        for &n in &ctx.plan.reload_ns.clone() {
            let probes = if n == ctx.plan.probe_n {
                ctx.plan.debounce_probes
            } else {
                0
            };
            match run_scenario(&format!("reload n={n}"), || {
                reload::reload_level(&ctx, n, probes)
            }) {
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
    let burst_r = on("burst").then(|| run_scenario("burst", || burst::burst(&ctx)));
    if let Some(b) = &burst_r {
        out["burst"] = match b {
            Ok(b) => b.json.clone(),
            Err(e) => e.clone(),
        };
    }
    let cold_r = on("cold").then(|| run_scenario("cold", || cold::cold(&ctx)));
    if let Some(c) = &cold_r {
        out["coldStart"] = match c {
            Ok(c) => c.json.clone(),
            Err(e) => e.clone(),
        };
    }
    let mut costs: Vec<cost::CostLevel> = Vec::new();
    let mut more_targets = serde_json::Map::new();
    if on("cost") {
        let mut cost = serde_json::Map::new();
        for &n in &ctx.plan.cost_ns.clone() {
            let idle = if n == ctx.plan.idle_n {
                ctx.plan.idle_window
            } else {
                ctx.plan.cost_idle
            };
            match run_scenario(&format!("cost n={n}"), || cost::cost_level(&ctx, n, idle)) {
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
        // The memory each server adds: the slope between the smallest and
        // the largest fleet (fixed costs cancel out).
        if let (Some(lo), Some(hi)) = (lo, hi)
            && let (Some(lo_hwm), Some(hi_hwm)) = (lo.hwm_kb, hi.hwm_kb)
        {
            let per = |a: u64, b: u64| (b as f64 - a as f64) / (hi.n - lo.n) as f64;
            let peak = per(lo_hwm, hi_hwm);
            let resident = lo.rss_kb.zip(hi.rss_kb).map(|(a, b)| r1(per(a, b)));
            cost.insert(
                "rssPerAddedServerKb".into(),
                json!({
                    "between": format!("n{} and n{}", lo.n, hi.n),
                    "peak": r1(peak),
                    "resident": resident,
                }),
            );
            more_targets.insert(
                "controllerRssPerServerKb".into(),
                target(
                    json!(r1(peak)),
                    "<= 50",
                    (hi.n >= 500).then_some(peak <= 50.0),
                ),
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

    let hub = on("mcp-hub").then(|| run_scenario("mcp-hub", || mcp_hub::mcp_hub(&ctx)));
    if let Some(h) = &hub {
        out["mcpHub"] = match h {
            Ok(h) => h.json.clone(),
            Err(e) => e.clone(),
        };
    }

    if on("readiness") {
        out["readiness"] = with_targets(
            &mut more_targets,
            run_scenario("readiness", || {
                readiness::readiness(&ctx).map(|r| (r.json, r.targets))
            }),
        );
    }
    if on("gate") {
        out["gate"] = with_targets(
            &mut more_targets,
            run_scenario("gate", || readiness::gate(&ctx)),
        );
    }

    if on("gateway") {
        out["gateway"] = with_targets(
            &mut more_targets,
            run_scenario("gateway", || gateway::gateway(&ctx)),
        );
    }

    if on("search") {
        out["search"] = with_targets(
            &mut more_targets,
            run_scenario("search", || gateway::search(&ctx)),
        );
    }

    if on("observe") {
        out["observe"] = with_targets(
            &mut more_targets,
            run_scenario("observe", || observe::observe(&ctx)),
        );
    }

    if on("storm") {
        out["storm"] = with_targets(
            &mut more_targets,
            run_scenario("storm", || storm::storm(&ctx).map(|s| (s.json, s.targets))),
        );
    }

    if on("restarts") {
        out["restarts"] = with_targets(
            &mut more_targets,
            run_scenario("restarts", || restarts::restarts(&ctx)),
        );
    }

    if on("first-list") {
        out["firstList"] = with_targets(
            &mut more_targets,
            run_scenario("first-list", || first_list::first_list(&ctx)),
        );
    }

    if on("lazy") {
        out["lazy"] = with_targets(&mut more_targets, run_scenario("lazy", || lazy::lazy(&ctx)));
    }

    if on("dev") {
        out["dev"] = with_targets(&mut more_targets, run_scenario("dev", || dev::dev(&ctx)));
    }

    if on("sandbox") {
        out["sandbox"] = with_targets(
            &mut more_targets,
            run_scenario("sandbox", || sandbox::sandbox(&ctx)),
        );
    }

    if on("sandbox-cost") {
        out["sandboxCost"] = with_targets(
            &mut more_targets,
            run_scenario("sandbox-cost", || sandbox_cost::sandbox_cost(&ctx)),
        );
    }

    if on("code") {
        out["code"] = with_targets(&mut more_targets, run_scenario("code", || code::code(&ctx)));
    }

    if on("views") {
        out["views"] = with_targets(
            &mut more_targets,
            run_scenario("views", || views::views(&ctx)),
        );
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

    // The targets each figure is held to.
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

//! Scenario `mcp-hub` of `steward-bench`: mcp-hub side by side.

use super::*;

/// A minimal HTTP/1.1 request (Connection: close); returns status and body.
pub fn http(port: u16, method: &str, path: &str, body: Option<&str>) -> Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("no HTTP header end"))?;
    let code: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow!("bad status line"))?;
    let chunked = head
        .lines()
        .any(|l| l.to_ascii_lowercase().starts_with("transfer-encoding:") && l.contains("chunked"));
    let body = if chunked {
        let mut out = String::new();
        let mut rest = rest;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 || after.len() < n {
                break;
            }
            out.push_str(&after[..n]);
            rest = after[n..].trim_start_matches("\r\n");
        }
        out
    } else {
        rest.to_owned()
    };
    Ok((code, body))
}

pub struct Hub {
    pub child: Option<Child>,
    pub pid: u32,
    pub port: u16,
    pub log: PathBuf,
    pub spawned: Instant,
    pub reg: u64,
}

impl Hub {
    pub fn spawn(exe: &Path, config: &Path, root: &Path) -> Result<Hub> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let home = root.join("hub-home");
        std::fs::create_dir_all(&home)?;
        let log = root.join("mcp-hub.log");
        let out = std::fs::File::create(&log)?;
        let err = out.try_clone()?;
        let mut cmd = Command::new(exe);
        cmd.args(["--port", &port.to_string(), "--config"])
            .arg(config)
            .arg("--watch")
            .env_clear()
            .envs(base_env())
            .env("HOME", &home)
            .env("XDG_STATE_HOME", home.join("state"))
            .env("XDG_DATA_HOME", home.join("data"))
            .env("XDG_CONFIG_HOME", home.join("config"))
            .env("XDG_CACHE_HOME", home.join("cache"))
            .current_dir(root)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Its own process group: the fakes it spawns can be stopped with it.
            .process_group(0);
        let spawned = Instant::now();
        let child = cmd
            .spawn()
            .with_context(|| format!("spawn {}", exe.display()))?;
        let pid = child.id();
        let reg = register(Live::Proc {
            pid: pid as i32,
            group: true,
        });
        Ok(Hub {
            child: Some(child),
            pid,
            port,
            log,
            spawned,
            reg,
        })
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }

    pub fn check_running(&mut self) -> Result<()> {
        if let Some(Ok(Some(code))) = self.child.as_mut().map(Child::try_wait) {
            bail!("mcp-hub exited with {code}:\n{}", self.log_tail());
        }
        Ok(())
    }

    /// `GET /api/servers` → name → status.
    pub fn statuses(&self) -> Result<BTreeMap<String, String>> {
        let (code, body) = http(self.port, "GET", "/api/servers", None)?;
        if code != 200 {
            bail!("GET /api/servers: HTTP {code}");
        }
        let v: Value = serde_json::from_str(&body)?;
        Ok(v["servers"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|s| {
                        (
                            s["name"].as_str().unwrap_or("").to_owned(),
                            s["status"].as_str().unwrap_or("").to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// `POST /api/servers/info` → the server's status.
    pub fn status_of(&self, name: &str) -> Result<String> {
        let body = json!({ "server_name": name }).to_string();
        let (code, text) = http(self.port, "POST", "/api/servers/info", Some(&body))?;
        if code != 200 {
            bail!("POST /api/servers/info: HTTP {code}: {text}");
        }
        let v: Value = serde_json::from_str(&text)?;
        Ok(v["server"]["status"].as_str().unwrap_or("").to_owned())
    }

    pub fn terminate(&mut self) -> Option<bool> {
        let mut child = self.child.take()?;
        signal(self.pid as i32, libc::SIGTERM);
        let mut clean = poll(
            Duration::from_secs(10),
            Duration::from_millis(10),
            || match child.try_wait() {
                Ok(Some(status)) => Ok(status.success()),
                _ => Err(()),
            },
        )
        .ok();
        // Whatever is left of its group (fakes it did not stop) goes too.
        signal(-(self.pid as i32), libc::SIGKILL);
        if clean.is_none() {
            let _ = child.kill();
            let _ = child.wait();
            clean = Some(false);
        }
        unregister(self.reg);
        clean
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.terminate();
    }
}

pub fn find_mcp_hub(opts: &Opts) -> Result<(PathBuf, Value)> {
    let exe = opts
        .mcp_hub
        .clone()
        .unwrap_or_else(|| repo_root().join(".peers/node_modules/.bin/mcp-hub"));
    if !exe.exists() {
        bail!(
            "mcp-hub is not installed at {} (`.ci/run` installs it; or \
             `npm install --prefix .peers mcp-hub@4.2.1`)",
            exe.display()
        );
    }
    let node = Command::new("node")
        .arg("--version")
        .output()
        .map_err(|e| anyhow!("node is not runnable: {e}"))?;
    let node = String::from_utf8_lossy(&node.stdout).trim().to_owned();
    let real = std::fs::canonicalize(&exe).unwrap_or(exe.clone());
    let version = real
        .ancestors()
        .map(|d| d.join("package.json"))
        .find(|p| p.exists())
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["version"].as_str().map(str::to_owned));
    Ok((
        exe.clone(),
        json!({ "exe": exe.display().to_string(), "version": version, "node": node }),
    ))
}

pub struct HubRun {
    pub sb: GuardedEnv,
    pub fleet: Fleet,
    pub config: PathBuf,
    pub hub: Hub,
    pub cold_ms: f64,
    pub spawned_ms: f64,
}

pub fn start_hub(exe: &Path, ctx: &Ctx, n: usize) -> Result<HubRun> {
    start_hub_with(exe, ctx, n, &FakeMcpConfig::default())
}

pub fn start_hub_with(exe: &Path, ctx: &Ctx, n: usize, base: &FakeMcpConfig) -> Result<HubRun> {
    let sb = GuardedEnv::new();
    let config = sb.env.root.path().join("mcp-hub.json");
    let fleet = Fleet::with(&ctx.fake, &sb.env.records(), n, base);
    write_by_rename(&config, &fleet.content(false), 0)?;
    let mut hub = Hub::spawn(exe, &config, sb.env.root.path())?;
    let limit = deadline_for(n);
    let deadline = Instant::now() + limit;
    let mut all_spawned = None;
    let t_ready = loop {
        if Instant::now() > deadline {
            bail!(
                "mcp-hub did not connect {n} servers within {limit:?}\n{}",
                hub.log_tail()
            );
        }
        hub.check_running()?;
        if all_spawned.is_none() {
            // Free for mcp-hub: wait on the record files first.
            if fleet.start_counts().iter().all(|c| *c > 0) {
                all_spawned = Some(Instant::now());
            }
        } else if let Ok(st) = hub.statuses()
            && st.len() == n
            && st.values().all(|s| s == "connected")
        {
            break Instant::now();
        }
        // The polling interval (record files, then /api/servers).
        std::thread::sleep(sweep_interval(n));
    };
    Ok(HubRun {
        cold_ms: ms(t_ready - hub.spawned),
        spawned_ms: ms(all_spawned.unwrap_or(t_ready) - hub.spawned),
        sb,
        fleet,
        config,
        hub,
    })
}

/// One edit under mcp-hub: write, wait for a new process of the server
/// (record file), then for `connected` in its API. Returns (write → new
/// process seen, write → connected).
pub fn hub_edit(
    run: &mut HubRun,
    idx: usize,
    value: &str,
    seq: u64,
) -> Result<(Instant, f64, f64)> {
    let prev = run.fleet.starts_of(idx);
    run.fleet.set(idx, EDIT_KEY, value);
    let t0 = write_by_rename(&run.config, &run.fleet.content(false), seq)?;
    let (spawn, _) = wait_new_process(&run.fleet, idx, &prev, false)?;
    let name = run.fleet.names[idx].clone();
    let deadline = Instant::now() + DEADLINE;
    loop {
        run.hub.check_running()?;
        if run.hub.status_of(&name)? == "connected" {
            return Ok((t0, ms(spawn - t0), ms(Instant::now() - t0)));
        }
        if Instant::now() > deadline {
            bail!("mcp-hub did not reconnect {name} within {DEADLINE:?}");
        }
        // The polling interval of the API.
        std::thread::sleep(Duration::from_millis(2));
    }
}

pub struct HubResult {
    pub json: Value,
    pub cold: Vec<f64>,
    pub ready: Vec<f64>,
    pub hwm_kb: Option<u64>,
    pub n: usize,
}

/// Spacing between mcp-hub edits: its watcher waits for the file to be
/// stable for 200 ms (polled every 100 ms) before it reads it.
pub const HUB_SPACING: Duration = Duration::from_millis(600);

pub fn mcp_hub(ctx: &Ctx) -> Result<HubResult> {
    let (exe, about) = find_mcp_hub(&ctx.opts)?;
    let n = ctx.plan.hub_n;
    let (mut cold, mut spawned) = (Vec::new(), Vec::new());
    let mut run = None;
    let mut teardown = Vec::new();
    for rep in 0..ctx.plan.hub_cold_repeats {
        progress(format!("mcp-hub cold start: {n} servers (run {})", rep + 1));
        if let Some(mut old) = run.take() {
            let HubRun {
                ref mut hub,
                ref sb,
                ..
            } = old;
            let clean = hub.terminate();
            teardown.push(
                json!({"exitedCleanly": clean, "fakesLeftRunningAndKilled": sb.reap_fakes()}),
            );
        }
        let r = start_hub(&exe, ctx, n)?;
        cold.push(r.cold_ms);
        spawned.push(r.spawned_ms);
        run = Some(r);
    }
    let mut run = run.ok_or_else(|| anyhow!("no mcp-hub run"))?;
    progress(format!(
        "mcp-hub reload: {n} servers, {} edits",
        ctx.plan.hub_edits
    ));
    std::thread::sleep(HUB_SPACING);
    let mut churn = Churn::new(&run.fleet);
    let (mut spawn_ms, mut ready) = (Vec::new(), Vec::new());
    let mut seq = 1;
    for k in 0..ctx.plan.hub_edits {
        let idx = run.fleet.target(k);
        let (t0, s, r) = hub_edit(&mut run, idx, &format!("e{k}"), seq)?;
        seq += 1;
        spawn_ms.push(s);
        ready.push(r);
        churn.close(&run.fleet, &[idx]);
        sleep_until((t0 + HUB_SPACING).max(Instant::now() + Duration::from_millis(100)));
    }
    // Reorder-only rewrite, processed before a sentinel edit.
    let mut reorder = Churn::new(&run.fleet);
    let t_r = write_by_rename(&run.config, &run.fleet.content(true), seq)?;
    seq += 1;
    sleep_until(t_r + HUB_SPACING);
    let sentinel = run.fleet.target(2000);
    let (t0, _, _) = hub_edit(&mut run, sentinel, "sentinel", seq)?;
    sleep_until(t0 + HUB_SPACING);
    reorder.close(&run.fleet, &[sentinel]);
    churn.close(&run.fleet, &[sentinel]);
    let hwm = status_kb(run.hub.pid, "VmHWM:");
    let cpu = cpu_ticks(run.hub.pid);
    let spawn_to_ready: Vec<f64> = ready.iter().zip(&spawn_ms).map(|(r, s)| r - s).collect();
    let clean = run.hub.terminate();
    teardown
        .push(json!({"exitedCleanly": clean, "fakesLeftRunningAndKilled": run.sb.reap_fakes()}));
    let mut json = about;
    json["servers"] = json!(n);
    json["coldStart"] = json!({
        "runs": cold.len(),
        "spawnToAllConnected": summary_ms(&cold),
        "spawnToAllProcessesStarted": summary_ms(&spawned),
        "how": "record files until every fake started, then GET /api/servers every 5 ms \
                until all are `connected`",
    });
    json["reload"] = json!({
        "edits": ready.len(),
        "latencyWriteToConnected": summary_ms(&ready),
        "latencyWriteToNewProcess": summary_ms(&spawn_ms),
        "latencyNewProcessToConnected": summary_ms(&spawn_to_ready),
        "how": "rename into place; the fake's record file shows the new process (polled every \
                1 ms), then POST /api/servers/info every 2 ms until `connected`",
    });
    json["churn"] = churn.json();
    json["reorderOnlyEdit"] = json!({
        "unchangedRestarts": reorder.unchanged_restarts,
        "unchangedRestarted": reorder.offenders,
        "sentinelRestarts": reorder.target_restarts.first().copied().unwrap_or(0),
    });
    json["peakRssMb"] = mb(hwm);
    json["cpuTotalS"] = json!(cpu.map(|t| r3(t as f64 / clk_tck() as f64)));
    json["teardown"] = teardowns(&teardown);
    Ok(HubResult {
        json,
        cold,
        ready,
        hwm_kb: hwm,
        n,
    })
}

//! The steward controller under `steward-bench`, and observing its status:
//! the watch stream or polling.

use super::*;

pub struct Stw {
    pub child: Option<Child>,
    pub pid: u32,
    pub socket: PathBuf,
    pub log: PathBuf,
    pub spawned: Instant,
    pub reg: u64,
}

impl Stw {
    pub fn spawn(ctx: &Ctx, env: &Env, extra: &[String]) -> Result<Stw> {
        let log = env.root.path().join("controller.log");
        let log_file = std::fs::File::create(&log)?;
        // RUST_LOG unset: the product default filter ("info,rmcp=warn").
        let vars = env.quiet_vars();
        let mut cmd = Command::new(&ctx.steward);
        cmd.arg("--workspace")
            .arg(&env.ws)
            .arg("run")
            .args(["--debounce-ms", &ctx.opts.debounce_ms.to_string()])
            .args(&ctx.opts.controller_args)
            .args(extra)
            .env_clear()
            .envs(base_env())
            .envs(vars)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file);
        let spawned = Instant::now();
        let child = cmd.spawn().context("spawn steward-under-test run")?;
        let pid = child.id();
        let reg = register(Live::Proc {
            pid: pid as i32,
            group: false,
        });
        Ok(Stw {
            child: Some(child),
            pid,
            socket: env.paths().socket_path(),
            log,
            spawned,
            reg,
        })
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    pub fn check_running(&mut self) -> Result<()> {
        if let Some(Ok(Some(code))) = self.child.as_mut().map(Child::try_wait) {
            bail!("the controller exited with {code}:\n{}", self.log_tail());
        }
        Ok(())
    }

    /// Open the status observer, retrying until the socket answers.
    pub fn observe(&mut self, how: Observe) -> Result<Observer> {
        let start = Instant::now();
        loop {
            self.check_running()?;
            let attempt = match how {
                Observe::Watch => StatusStream::open(&self.socket).map(Observer::Watch),
                Observe::Poll => Poller::new(&self.socket).map(Observer::Poll),
            };
            match attempt {
                Ok(o) => return Ok(o),
                Err(e) if start.elapsed() > DEADLINE => {
                    bail!(
                        "the control socket did not answer: {e}\n{}",
                        self.log_tail()
                    )
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    }

    /// One `status` request (outside any timed region).
    pub fn status(&self) -> Result<WorkspaceStatus> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(rt.block_on(client::status(&self.socket, false, Duration::from_secs(10)))?)
    }

    pub fn log_count(&self, needle: &str, from: usize) -> usize {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.get(from..)
            .unwrap_or("")
            .lines()
            .filter(|l| l.contains(needle))
            .count()
    }

    pub fn log_len(&self) -> usize {
        std::fs::metadata(&self.log)
            .map(|m| m.len() as usize)
            .unwrap_or(0)
    }

    /// SIGTERM, wait (bounded), SIGKILL. Returns whether it exited cleanly.
    pub fn terminate(&mut self) -> Option<bool> {
        let mut child = self.child.take()?;
        signal(child.id() as i32, libc::SIGTERM);
        let mut clean = poll(DEADLINE, Duration::from_millis(10), || {
            match child.try_wait() {
                Ok(Some(status)) => Ok(status.success()),
                _ => Err(()),
            }
        })
        .ok();
        if clean.is_none() {
            let _ = child.kill();
            let _ = child.wait();
            clean = Some(false);
        }
        unregister(self.reg);
        clean
    }
}

/// `steward mcp` on the workspace of `env`, as an agent launches it: its
/// stdio piped for an MCP client, its log appended to `steward-mcp.log`
/// in the env's root, killed when dropped.
pub fn steward_mcp(ctx: &Ctx, env: &Env) -> Result<tokio::process::Command> {
    let log = std::fs::File::options()
        .append(true)
        .create(true)
        .open(env.root.path().join("steward-mcp.log"))?;
    let mut cmd = tokio::process::Command::new(&ctx.steward);
    cmd.arg("--workspace")
        .arg(&env.ws)
        .arg("mcp")
        .env_clear()
        .envs(base_env())
        .envs(env.quiet_vars())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log)
        .kill_on_drop(true);
    Ok(cmd)
}

/// An agent: [`steward_mcp`] launched with an rmcp client (`handler`) on
/// its stdio, the process registered for the cleanup (its id returned).
pub async fn agent<H: rmcp::service::Service<rmcp::RoleClient>>(
    ctx: &Ctx,
    env: &Env,
    handler: H,
) -> Result<(
    tokio::process::Child,
    rmcp::service::RunningService<rmcp::RoleClient, H>,
    u64,
)> {
    use rmcp::ServiceExt as _;
    let mut child = steward_mcp(ctx, env)?
        .spawn()
        .context("spawn steward mcp")?;
    let (stdout, stdin) = (
        child.stdout.take().context("stdout")?,
        child.stdin.take().context("stdin")?,
    );
    let client = handler.serve((stdout, stdin)).await?;
    let reg = register(Live::Proc {
        pid: child.id().unwrap_or_default() as i32,
        group: false,
    });
    Ok((child, client, reg))
}

impl Drop for Stw {
    fn drop(&mut self) {
        self.terminate();
    }
}

// ---------------------------------------------------------------------------
// Observing the status: the watch stream or polling

/// The control socket's `watch` stream, read on its own thread and
/// timestamped on receipt of each line.
pub struct StatusStream {
    pub rx: mpsc::Receiver<(Instant, Result<WorkspaceStatus, String>)>,
    pub stream: UnixStream,
}

impl StatusStream {
    pub fn open(socket: &Path) -> Result<StatusStream> {
        let mut stream = UnixStream::connect(socket)?;
        stream.write_all(&protocol::request_line(&Request::Watch)?)?;
        let reader = stream.try_clone()?;
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("bench-watch".into())
            .spawn(move || {
                let mut r = BufReader::new(reader);
                let mut line = String::new();
                loop {
                    line.clear();
                    match r.read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    let t = Instant::now();
                    let doc = client::read_status(&line).map_err(|e| e.to_string());
                    if tx.send((t, doc)).is_err() {
                        return;
                    }
                }
            })?;
        Ok(StatusStream { rx, stream })
    }
}

impl Drop for StatusStream {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// `status` every 2 ms through `steward::control::client::status`.
pub struct Poller {
    pub socket: PathBuf,
    pub rt: tokio::runtime::Runtime,
    pub every: Duration,
    pub next_at: Instant,
}

impl Poller {
    pub fn new(socket: &Path) -> Result<Poller> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(client::status(socket, false, Duration::from_secs(5)))?;
        Ok(Poller {
            socket: socket.to_path_buf(),
            rt,
            every: Duration::from_millis(2),
            next_at: Instant::now(),
        })
    }
}

pub enum Observer {
    Watch(StatusStream),
    Poll(Poller),
}

impl Observer {
    /// The next status document and when it was received; `None` at the deadline.
    pub fn next(&mut self, deadline: Instant) -> Result<Option<(Instant, WorkspaceStatus)>> {
        match self {
            Observer::Watch(w) => {
                let wait = deadline.saturating_duration_since(Instant::now());
                match w.rx.recv_timeout(wait) {
                    Ok((t, Ok(s))) => Ok(Some((t, s))),
                    Ok((_, Err(e))) => bail!("watch stream: {e}"),
                    Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        bail!("the watch stream closed")
                    }
                }
            }
            Observer::Poll(p) => {
                let now = Instant::now();
                if now >= deadline {
                    return Ok(None);
                }
                if p.next_at > now {
                    // The sampling interval of the poller, not a stand-in for a condition.
                    std::thread::sleep(p.next_at - now);
                }
                p.next_at = Instant::now() + p.every;
                let s =
                    p.rt.block_on(client::status(&p.socket, false, Duration::from_secs(5)))?;
                let t = Instant::now();
                Ok(Some((t, s)))
            }
        }
    }

    /// Feed documents to `f` until it returns true; returns that document's time.
    pub fn wait(
        &mut self,
        what: &str,
        f: impl FnMut(Instant, &WorkspaceStatus) -> bool,
    ) -> Result<(Instant, WorkspaceStatus)> {
        self.wait_for(what, DEADLINE, f)
    }

    /// [`Self::wait`] with a bound of `limit`.
    pub fn wait_for(
        &mut self,
        what: &str,
        limit: Duration,
        mut f: impl FnMut(Instant, &WorkspaceStatus) -> bool,
    ) -> Result<(Instant, WorkspaceStatus)> {
        let deadline = Instant::now() + limit;
        let mut last = None;
        while let Some((t, s)) = self.next(deadline)? {
            if f(t, &s) {
                return Ok((t, s));
            }
            last = Some(s);
        }
        let brief = last.map(|s| {
            s.items
                .iter()
                .filter_map(|i| match i {
                    Item::McpServer(m) if !fresh_ready(m) => Some(format!(
                        "{}={:?}/{:?}",
                        m.metadata.name, m.status.phase, m.status.reason
                    )),
                    _ => None,
                })
                .take(10)
                .collect::<Vec<_>>()
        });
        bail!("timed out after {limit:?} waiting for {what}; not ready: {brief:?}")
    }
}

pub fn mcp<'a>(s: &'a WorkspaceStatus, name: &str) -> Option<&'a McpServer> {
    s.items.iter().find_map(|i| match i {
        Item::McpServer(m) if m.metadata.name == name => Some(m),
        _ => None,
    })
}

/// `Ready` with the desired configuration observed.
pub fn fresh_ready(m: &McpServer) -> bool {
    m.status.phase == Phase::Ready
        && m.status.observed_hash.as_deref() == Some(m.spec.config_hash.as_str())
}

pub fn spec_env<'a>(m: &'a McpServer, key: &str) -> Option<&'a str> {
    m.spec.env.as_ref()?.get(key).map(String::as_str)
}

pub fn all_ready(s: &WorkspaceStatus, fleet: &Fleet) -> bool {
    let ready = s
        .items
        .iter()
        .filter(|i| matches!(i, Item::McpServer(m) if fresh_ready(m)))
        .count();
    ready == fleet.len()
}

pub fn pids(s: &WorkspaceStatus) -> BTreeMap<String, Option<u32>> {
    s.items
        .iter()
        .filter_map(|i| match i {
            Item::McpServer(m) => Some((m.metadata.name.clone(), m.status.pid)),
            _ => None,
        })
        .collect()
}

/// One timed edit of server `idx` to `EDIT_KEY = value`, observed through the socket.
#[derive(Debug, Clone, Copy)]
pub struct EditSample {
    pub t0: Instant,
    /// write → the new spec visible in the status (detect + debounce + parse + apply).
    pub applied_ms: f64,
    /// write → Ready with the new hash and a new pid (`None`: not waited for).
    pub ready_ms: Option<f64>,
    /// write → first `Stopping` / `Starting` seen (if a document showed it).
    pub stopping_ms: Option<f64>,
    pub starting_ms: Option<f64>,
    /// Unchanged servers whose pid changed in the status during the edit.
    pub pid_changes: usize,
}

/// Write the edit and wait until it is applied (and, with `wait_ready`,
/// until the server is Ready with it under a new pid).
#[allow(clippy::too_many_arguments)]
pub fn steward_edit(
    obs: &mut Observer,
    fleet: &mut Fleet,
    settings: &Path,
    idx: usize,
    value: &str,
    seq: u64,
    baseline: &mut BTreeMap<String, Option<u32>>,
    wait_ready: bool,
) -> Result<EditSample> {
    let name = fleet.names[idx].clone();
    let old_pid = baseline.get(&name).copied().flatten();
    fleet.set(idx, EDIT_KEY, value);
    let content = fleet.content(false);
    let t0 = write_by_rename(settings, &content, seq)?;
    let (mut applied, mut stopping, mut starting) = (None, None, None);
    let mut changed_others = BTreeSet::new();
    let what = format!("{name} with {EDIT_KEY}={value} (ready: {wait_ready})");
    let (t, last) = obs.wait(&what, |t, s| {
        let Some(m) = mcp(s, &name) else {
            return false;
        };
        let is_applied = spec_env(m, EDIT_KEY) == Some(value);
        if is_applied && applied.is_none() {
            applied = Some(t);
        }
        if applied.is_some() {
            match m.status.phase {
                Phase::Stopping if stopping.is_none() => stopping = Some(t),
                Phase::Starting if starting.is_none() => starting = Some(t),
                _ => {}
            }
        }
        for (other, pid) in pids(s) {
            let before = baseline.get(&other).copied().flatten();
            if other != name && pid.is_some() && before.is_some() && before != pid {
                changed_others.insert(other);
            }
        }
        is_applied && (!wait_ready || (fresh_ready(m) && m.status.pid != old_pid))
    })?;
    let applied = applied.unwrap_or(t);
    for (k, v) in pids(&last) {
        if k != name || wait_ready {
            baseline.insert(k, v);
        }
    }
    Ok(EditSample {
        t0,
        applied_ms: ms(applied - t0),
        ready_ms: wait_ready.then(|| ms(t - t0)),
        stopping_ms: stopping.map(|x: Instant| ms(x - t0)),
        starting_ms: starting.map(|x: Instant| ms(x - t0)),
        pid_changes: changed_others.len(),
    })
}

/// Sleep until `at` (the deliberate spacing between edits).
pub fn sleep_until(at: Instant) {
    let now = Instant::now();
    if at > now {
        std::thread::sleep(at - now);
    }
}

/// Start a controller on a fresh sandbox with `n` fake servers in user
/// settings and wait until all are Ready. Returns the time to all Ready.
pub struct Running {
    pub sb: GuardedEnv,
    pub fleet: Fleet,
    pub settings: PathBuf,
    pub stw: Stw,
    pub obs: Option<Observer>,
    pub baseline: BTreeMap<String, Option<u32>>,
    /// Controller spawn → its socket answered (with a client from the start).
    pub socket_ms: Option<f64>,
    /// Controller spawn → every server Ready (as observed).
    pub cold_ms: f64,
}

/// With `client`, the status is observed from the start (`--observe`); without,
/// no socket client exists until every fake has answered `tools/list` (read
/// from the record files), then `status` is polled every 2 ms until all are
/// Ready and the poller is closed.
pub fn start_steward(ctx: &Ctx, n: usize, client: bool) -> Result<Running> {
    start_steward_with(ctx, n, client, &FakeMcpConfig::default(), &[])
}

/// [`start_steward`] with fakes of config `base` and `extra` arguments to
/// `steward run`.
pub fn start_steward_with(
    ctx: &Ctx,
    n: usize,
    client: bool,
    base: &FakeMcpConfig,
    extra: &[String],
) -> Result<Running> {
    start_steward_full(ctx, n, client, base, extra, &[])
}

/// [`start_steward_with`] with `vars` added to the controller's environment.
pub fn start_steward_full(
    ctx: &Ctx,
    n: usize,
    client: bool,
    base: &FakeMcpConfig,
    extra: &[String],
    vars: &[(&str, &str)],
) -> Result<Running> {
    let sb = GuardedEnv::new();
    for (key, value) in vars {
        sb.env.set_var(key, value);
    }
    let settings = sb.env.home.join("settings.json");
    let fleet = Fleet::with(&ctx.fake, &sb.env.records(), n, base);
    write_by_rename(&settings, &fleet.content(false), 0)?;
    let mut stw = Stw::spawn(ctx, &sb.env, extra)?;
    progress(format!("  controller pid {} ({n} servers)", stw.pid));
    let (mut obs, socket_ms) = if client {
        let obs = stw.observe(ctx.opts.observe)?;
        (obs, Some(ms(stw.spawned.elapsed())))
    } else {
        wait_all_listed(&fleet, &mut stw)?;
        (stw.observe(Observe::Poll)?, None)
    };
    let (t, s) = obs.wait_for(&format!("{n} servers Ready"), deadline_for(n), |_, s| {
        all_ready(s, &fleet)
    })?;
    Ok(Running {
        cold_ms: ms(t - stw.spawned),
        socket_ms,
        baseline: pids(&s),
        obs: client.then_some(obs),
        sb,
        fleet,
        settings,
        stw,
    })
}

/// The bound on a wait for `n` servers to start.
pub fn deadline_for(n: usize) -> Duration {
    DEADLINE + Duration::from_millis(100) * n as u32
}

/// How often the record files of `n` fakes (or a status of `n` servers) are
/// read while waiting for a start: 5 ms, longer for large fleets so that the
/// bench's own reading stays a small share of the 2-core machine.
pub fn sweep_interval(n: usize) -> Duration {
    Duration::from_micros(100 * n as u64).max(Duration::from_millis(5))
}

/// Wait (reading the record files every 5 ms; free for the controller)
/// until every fake of `fleet` has answered `tools/list`.
pub fn wait_all_listed(fleet: &Fleet, stw: &mut Stw) -> Result<Instant> {
    let mut pending: Vec<usize> = (0..fleet.len()).collect();
    let limit = deadline_for(fleet.len());
    let deadline = Instant::now() + limit;
    loop {
        stw.check_running()?;
        pending.retain(|&i| {
            let ev = read_record(&fleet.record(i)).unwrap_or_default();
            !ev.iter()
                .any(|e| e.event == "start" && answered_tools_list(&ev, e.pid))
        });
        if pending.is_empty() {
            return Ok(Instant::now());
        }
        if Instant::now() > deadline {
            bail!(
                "{} servers did not list tools within {limit:?}",
                pending.len()
            );
        }
        std::thread::sleep(sweep_interval(fleet.len()));
    }
}

impl Running {
    pub fn obs(&mut self) -> Result<&mut Observer> {
        self.obs.as_mut().ok_or_else(|| anyhow!("no observer"))
    }

    /// Stop the controller and check that its fakes are gone.
    pub fn finish(mut self) -> Value {
        self.obs = None;
        let clean = self.stw.terminate();
        let killed = self.sb.reap_fakes();
        json!({ "controllerExitedCleanly": clean, "fakesLeftRunningAndKilled": killed })
    }
}

//! Scenario `lazy` of `steward-bench`: what `--start lazy` and
//! `--idle-stop` save. A workspace of [`SERVERS`] real `mcp-server-time`
//! servers (Python, from the peers directory; each entry has its own `env`
//! so each has its own `configHash`) of which an agent calls [`CALLED`].
//!
//! A first `steward run` (eager) fills the catalog cache and stops. Then,
//! for `eager` and for `lazy --idle-stop IDLE`: `steward run`, wait for its
//! first reload, an rmcp client through `steward mcp` (attached) lists the
//! tools (every server's, from the cache under lazy) and calls
//! `get_current_time` of the first [`CALLED`] servers, timing each call;
//! then the resident memory (`VmRSS`) of the server processes the status
//! names, with their descendants. Under lazy the scenario then waits until
//! the called servers are stopped for idleness (phase `Idle`, reason
//! `IdleStopped`), measures again, and times one more call, which starts
//! its server again.

use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use steward_schema::resource::Reason;

use super::*;

const SERVERS: usize = 20;
const CALLED: usize = 3;
const IDLE: &str = "3s";

/// Resident memory of `pids` and their descendants: (processes, KiB).
fn tree_rss_kib(pids: &[u32]) -> (usize, u64) {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // The field after the command's closing parenthesis: state, ppid.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse().ok());
            if let Some(ppid) = ppid {
                parents.push((pid, ppid));
            }
        }
    }
    let mut tree: Vec<u32> = pids.to_vec();
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    let kib = tree
        .iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .sum();
    (tree.len(), kib)
}

/// The server processes a status names, and what they hold.
fn servers_memory(s: &WorkspaceStatus) -> Value {
    let pids: Vec<u32> = s
        .items
        .iter()
        .filter_map(|i| match i {
            Item::McpServer(m) => m.status.pid,
            _ => None,
        })
        .collect();
    let (processes, kib) = tree_rss_kib(&pids);
    json!({
        "servers": pids.len(),
        "processes": processes,
        "rssMb": r1(kib as f64 / 1024.0),
    })
}

fn count_phase(s: &WorkspaceStatus, phase: Phase, reason: Option<Reason>) -> usize {
    s.items
        .iter()
        .filter(|i| matches!(i, Item::McpServer(m) if m.status.phase == phase && m.status.reason == reason))
        .count()
}

/// Wait (bounded) until `pred` holds of the status (followed as it
/// changes).
fn wait_status(
    stw: &mut Stw,
    what: &str,
    within: Duration,
    pred: impl Fn(&WorkspaceStatus) -> bool,
) -> Result<WorkspaceStatus> {
    let (_, s) = stw
        .observe(Observe::Watch)?
        .wait_for(what, within, |_, s| pred(s))?;
    Ok(s)
}

/// An rmcp client on `steward mcp` (attached to the running controller).
struct Agent {
    rt: tokio::runtime::Runtime,
    child: tokio::process::Child,
    client: Option<RunningService<RoleClient, ()>>,
    reg: u64,
}

impl Agent {
    fn attach(ctx: &Ctx, env: &Env) -> Result<Agent> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let (child, client, reg) = rt.block_on(agent(ctx, env, ()))?;
        Ok(Agent {
            rt,
            child,
            client: Some(client),
            reg,
        })
    }

    fn peer(&self) -> &rmcp::Peer<RoleClient> {
        self.client.as_ref().expect("open until dropped").peer()
    }

    /// How many tools the agent is offered.
    fn list(&self) -> Result<usize> {
        Ok(self.rt.block_on(self.peer().list_all_tools())?.len())
    }

    /// Call `server`'s `get_current_time`; its time in ms.
    fn call_time(&self, server: &str) -> Result<f64> {
        let mut args = serde_json::Map::new();
        args.insert("timezone".into(), json!("UTC"));
        let t0 = Instant::now();
        let result = self.rt.block_on(self.peer().call_tool(
            CallToolRequestParams::new(format!("{server}__get_current_time")).with_arguments(args),
        ))?;
        if result.is_error == Some(true) {
            bail!("{server}__get_current_time failed: {:?}", result.content);
        }
        Ok(ms(t0.elapsed()))
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = self.rt.block_on(client.cancel());
        }
        let child = &mut self.child;
        let _ = self
            .rt
            .block_on(async { tokio::time::timeout(DEADLINE, child.wait()).await });
        unregister(self.reg);
    }
}

pub(super) fn lazy(ctx: &Ctx) -> Result<(Value, serde_json::Map<String, Value>)> {
    let n = if ctx.opts.quick { 5 } else { SERVERS };
    let time = first_list::peers_dir().join("venv/bin/mcp-server-time");
    if !time.is_file() {
        bail!(
            "{} is not installed (set STEWARD_PEERS_DIR to the peers directory)",
            time.display()
        );
    }
    let names: Vec<String> = (0..n).map(|i| format!("time{i:02}")).collect();
    let entries: serde_json::Map<String, Value> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let entry = json!({
                "command": time.to_string_lossy(),
                "args": ["--local-timezone=UTC"],
                "env": {"COPY": i.to_string()},
            });
            (name.clone(), entry)
        })
        .collect();
    let sb = GuardedEnv::new();
    let env = &sb.env;
    write_by_rename(
        &env.home.join("settings.json"),
        &serde_json::to_string_pretty(&json!({ "mcpServers": entries }))?,
        0,
    )?;
    // Real servers starting together are slow on a small machine.
    let slow = DEADLINE * 6;

    progress(format!("lazy: filling the catalog cache ({n} servers)"));
    let mut stw = Stw::spawn(ctx, env, &[])?;
    wait_status(&mut stw, "every server Ready", slow, |s| {
        count_phase(s, Phase::Ready, None) == n
    })?;
    let cache = env.paths().catalog_cache_file();
    let deadline = Instant::now() + DEADLINE;
    while !names.iter().all(|name| {
        std::fs::read_to_string(&cache)
            .unwrap_or_default()
            .contains(&format!("\"{name}\""))
    }) {
        if Instant::now() > deadline {
            bail!("not every catalog was cached in {}", cache.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    stw.terminate();

    let mut modes = serde_json::Map::new();
    let mut rss = BTreeMap::new();
    for (mode, flags) in [
        ("eager", vec![]),
        (
            "lazy",
            vec![
                "--start".to_owned(),
                "lazy".to_owned(),
                "--idle-stop".to_owned(),
                IDLE.to_owned(),
            ],
        ),
    ] {
        progress(format!("lazy: {mode}, {CALLED} of {n} servers called"));
        let mut stw = Stw::spawn(ctx, env, &flags)?;
        wait_status(&mut stw, "the first reload", slow, |s| {
            s.controller.last_reload.is_some()
                && if mode == "eager" {
                    count_phase(s, Phase::Ready, None) == n
                } else {
                    count_phase(s, Phase::Idle, Some(Reason::NotStarted)) == n
                }
        })?;
        let agent = Agent::attach(ctx, env)?;
        let tools = agent.list()?;
        let calls: Vec<f64> = names[..CALLED]
            .iter()
            .map(|name| agent.call_time(name))
            .collect::<Result<_>>()?;
        let s = wait_status(&mut stw, "the called servers Ready", DEADLINE, |s| {
            names[..CALLED]
                .iter()
                .all(|name| mcp(s, name).is_some_and(|m| m.status.phase == Phase::Ready))
        })?;
        let after_calls = servers_memory(&s);
        rss.insert(mode, after_calls["rssMb"].as_f64().unwrap_or_default());
        let mut out = json!({
            "toolsListed": tools,
            "firstCallEachMs": calls.iter().map(|&c| r1(c)).collect::<Vec<_>>(),
            "afterCalls": after_calls,
        });
        if mode == "lazy" {
            let t0 = Instant::now();
            let s = wait_status(
                &mut stw,
                "the called servers stopped for idleness",
                slow,
                |s| {
                    count_phase(s, Phase::Idle, Some(Reason::IdleStopped)) == CALLED
                        && count_phase(s, Phase::Ready, None) == 0
                },
            )?;
            out["idleStop"] = json!(IDLE);
            out["idleStoppedAfterMs"] = json!(r1(ms(t0.elapsed())));
            out["afterIdleStop"] = servers_memory(&s);
            out["wakeCallMs"] = json!(r1(agent.call_time(&names[0])?));
        }
        drop(agent);
        if stw.terminate() != Some(true) {
            bail!("the controller did not stop cleanly:\n{}", stw.log_tail());
        }
        modes.insert(mode.into(), out);
    }
    let (eager, lazy) = (rss["eager"], rss["lazy"]);
    Ok((
        json!({
            "servers": n,
            "called": CALLED,
            "server": "mcp-server-time (python), one process each",
            "client": "rmcp through `steward mcp` attached to `steward run`",
            "eager": modes["eager"],
            "lazy": modes["lazy"],
            "lazyOverEagerRss": r3(lazy / eager),
        }),
        serde_json::Map::new(),
    ))
}

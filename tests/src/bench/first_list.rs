//! Scenario `first-list` of `steward-bench`: an agent's launch → its first
//! `tools/list` answered with every admitted server's tools, with a cold
//! catalog cache (no cache file: the list waits for the servers' cold start,
//! as before the cache) and a warm one (the cache a previous run left).
//!
//! Ten real servers from the peers directory (`$STEWARD_PEERS_DIR`, else
//! `<repo>/.peers`): five copies of `server-everything` (Node, stdio) and
//! five of `mcp-server-time` (Python), under different names. Each sample
//! spawns `steward mcp` with no controller running (it becomes the
//! controller), as an agent does, with an rmcp client on its stdio: the clock
//! starts right before the spawn and stops when the first `tools/list` (every
//! page) has answered; it must list every server's tools. Then the first call
//! of a `time` tool (it waits for that server when the list came from the
//! cache), the time until every server is Ready (status socket), and the
//! `list_changed` notifications the client got by then (none expected: the
//! live catalogs equal the cached ones). The client then leaves and the
//! controller stops before the next sample.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::model::CallToolRequestParams;
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};

use super::*;

/// Counts `tools/list_changed`.
#[derive(Clone, Default)]
struct Counting {
    changed: Arc<AtomicUsize>,
}

impl ClientHandler for Counting {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.fetch_add(1, Ordering::Relaxed);
    }
}

const EVERYTHING: usize = 5;
const TIME: usize = 5;

pub(super) fn peers_dir() -> PathBuf {
    match std::env::var_os("STEWARD_PEERS_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => repo_root().join(".peers"),
    }
}

/// The ten entries, by name.
fn servers() -> Result<Vec<(String, Value)>> {
    let peers = peers_dir();
    let everything = peers.join("node_modules/.bin/mcp-server-everything");
    let time = peers.join("venv/bin/mcp-server-time");
    for exe in [&everything, &time] {
        if !exe.is_file() {
            bail!(
                "{} is not installed (set STEWARD_PEERS_DIR to the peers directory)",
                exe.display()
            );
        }
    }
    let mut out = Vec::new();
    for i in 0..EVERYTHING {
        out.push((
            format!("everything{i}"),
            json!({"command": everything.to_string_lossy(), "args": ["stdio"]}),
        ));
    }
    for i in 0..TIME {
        out.push((
            format!("time{i}"),
            json!({"command": time.to_string_lossy()}),
        ));
    }
    Ok(out)
}

/// One agent launch.
struct Sample {
    first_list_ms: f64,
    tools: usize,
    first_call_ms: f64,
    all_ready_ms: f64,
    list_changed: usize,
}

/// Launch `steward mcp`, list, call, wait for every server, leave.
async fn launch(ctx: &Ctx, env: &Env, names: &[String]) -> Result<Sample> {
    let handler = Counting::default();
    let changed = handler.changed.clone();
    let t0 = Instant::now();
    let (mut child, client, reg) = agent(ctx, env, handler).await?;
    let tools = client.peer().list_all_tools().await?;
    let first_list_ms = ms(t0.elapsed());
    let listed: BTreeSet<&str> = tools
        .iter()
        .filter_map(|t| t.name.split_once("__").map(|(server, _)| server))
        .collect();
    if let Some(missing) = names.iter().find(|n| !listed.contains(n.as_str())) {
        bail!("the first list has no tool of {missing}");
    }
    let mut args = serde_json::Map::new();
    args.insert("timezone".into(), json!("UTC"));
    let called = client
        .peer()
        .call_tool(CallToolRequestParams::new("time0__get_current_time").with_arguments(args))
        .await?;
    let first_call_ms = ms(t0.elapsed());
    if called.is_error == Some(true) {
        bail!("time0__get_current_time failed: {:?}", called.content);
    }
    let socket = env.paths().socket_path();
    let all_ready_ms = loop {
        let status = client::status(&socket, false, Duration::from_secs(10)).await?;
        let ready = names.iter().all(|n| {
            status.items.iter().any(|item| {
                matches!(item, Item::McpServer(m)
                    if &m.metadata.name == n && m.status.phase == Phase::Ready)
            })
        });
        if ready {
            break ms(t0.elapsed());
        }
        if t0.elapsed() > DEADLINE * 2 {
            bail!("the servers did not all become Ready");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Past the broadcaster's coalescing window: a list_changed due to the
    // last server's publication has been sent.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let list_changed = changed.load(Ordering::Relaxed);
    client.cancel().await?;
    // The agent left: `steward mcp` stops its servers and exits.
    let exited = tokio::time::timeout(DEADLINE, child.wait()).await;
    unregister(reg);
    if !matches!(exited, Ok(Ok(status)) if status.success()) {
        bail!("steward mcp did not exit cleanly after the agent left: {exited:?}");
    }
    Ok(Sample {
        first_list_ms,
        tools: tools.len(),
        first_call_ms,
        all_ready_ms,
        list_changed,
    })
}

fn samples_json(samples: &[Sample]) -> Value {
    let col = |f: fn(&Sample) -> f64| samples.iter().map(f).collect::<Vec<f64>>();
    json!({
        "samples": samples.len(),
        "firstListMs": summary_ms(&col(|s| s.first_list_ms)),
        "firstListEachMs": col(|s| r1(s.first_list_ms)),
        "firstCallTime0Ms": summary_ms(&col(|s| s.first_call_ms)),
        "allReadyMs": summary_ms(&col(|s| s.all_ready_ms)),
        "toolsListed": samples.first().map(|s| s.tools),
        "listChangedUntilAllReady": samples.iter().map(|s| s.list_changed).collect::<Vec<_>>(),
    })
}

pub(super) fn first_list(ctx: &Ctx) -> Result<(Value, serde_json::Map<String, Value>)> {
    let (cold_n, warm_n) = if ctx.opts.quick { (1, 2) } else { (3, 5) };
    let servers = servers()?;
    let names: Vec<String> = servers.iter().map(|(n, _)| n.clone()).collect();
    let sb = GuardedEnv::new();
    let env = &sb.env;
    let entries: serde_json::Map<String, Value> = servers.into_iter().collect();
    write_by_rename(
        &env.home.join("settings.json"),
        &serde_json::to_string_pretty(&json!({ "mcpServers": entries }))?,
        0,
    )?;
    let cache = env.paths().catalog_cache_file();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut cold = Vec::new();
    for k in 0..cold_n {
        progress(format!("first-list: cold cache, launch {}", k + 1));
        let _ = std::fs::remove_file(&cache);
        cold.push(rt.block_on(launch(ctx, env, &names))?);
    }
    let mut warm = Vec::new();
    for k in 0..warm_n {
        progress(format!("first-list: warm cache, launch {}", k + 1));
        if !cache.is_file() {
            bail!("no catalog cache after a run: {}", cache.display());
        }
        warm.push(rt.block_on(launch(ctx, env, &names))?);
    }
    let (c, w) = (
        summarize(&cold.iter().map(|s| s.first_list_ms).collect::<Vec<_>>()).p50,
        summarize(&warm.iter().map(|s| s.first_list_ms).collect::<Vec<_>>()).p50,
    );
    let mut targets = serde_json::Map::new();
    targets.insert(
        "firstListWarmCacheP50Ms".into(),
        target(json!(r1(w)), "<= 150", Some(w <= 150.0)),
    );
    Ok((
        json!({
            "servers": {"server-everything (node, stdio)": EVERYTHING, "mcp-server-time (python)": TIME},
            "client": "rmcp, spawning `steward mcp` with no controller running",
            "cold": samples_json(&cold),
            "warm": samples_json(&warm),
            "ratioWarmOverColdP50": r3(w / c),
        }),
        targets,
    ))
}

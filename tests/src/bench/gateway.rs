//! Scenario `gateway` of `steward-bench`: the agent endpoint.
//!
//! One controller with N fakes (100; quick 10) and `--mcp-listen`; rmcp
//! clients (this process) call `s000__echo`:
//! - added latency: sequential calls through `steward mcp` (stdio, the way
//!   an agent runs it), through `/mcp` (streamable HTTP), and straight to a
//!   fake of the same config spawned by the client ("direct"); mcp-hub's
//!   `/mcp` (legacy SSE; it names tools `server__tool` too) on the same
//!   fakes, after the controller is stopped;
//! - throughput: 8 clients calling in a loop, per transport; direct is 8
//!   tasks on one connection to one fake (as the gateway's 8 clients share
//!   one server process);
//! - save → `notifications/tools/list_changed` at a stdio client, beside the
//!   reload latency of the same edit (watch stream);
//! - controller RSS with 10 clients (5 stdio, 5 HTTP) connected, listed and
//!   called.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::CallToolRequestParams;
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceExt as _};

use super::*;

/// A client that timestamps `tools/list_changed` on receipt.
#[derive(Clone)]
pub(super) struct Agent {
    changed: Option<Arc<Mutex<mpsc::Sender<Instant>>>>,
}

impl ClientHandler for Agent {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let t = Instant::now();
        if let Some(tx) = &self.changed {
            let _ = tx.lock().unwrap_or_else(|e| e.into_inner()).send(t);
        }
    }
}

pub(super) type Client = RunningService<RoleClient, Agent>;

pub(super) const TOOL: &str = "s000__echo";

pub(super) fn quiet() -> Agent {
    Agent { changed: None }
}

pub(super) async fn stdio_client(ctx: &Ctx, env: &Env, agent: Agent) -> Result<Client> {
    stdio_client_with(ctx, env, agent, &[]).await
}

/// `steward mcp ARGS` as a child, the way an agent runs it.
pub(super) async fn stdio_client_with(
    ctx: &Ctx,
    env: &Env,
    agent: Agent,
    args: &[&str],
) -> Result<Client> {
    let vars = env.quiet_vars();
    let mut cmd = tokio::process::Command::new(&ctx.steward);
    cmd.arg("--workspace")
        .arg(&env.ws)
        .arg("mcp")
        .args(args)
        .env_clear()
        .envs(base_env())
        .envs(vars);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .context("spawn steward mcp")?;
    Ok(agent.serve(transport).await?)
}

pub(super) async fn http_client(url: &str) -> Result<Client> {
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    Ok(quiet().serve(transport).await?)
}

/// A fake of the fleet's config (own record file), spawned by the client.
pub(super) async fn direct_client(fleet: &Fleet) -> Result<Client> {
    let config = FakeMcpConfig {
        record: Some(fleet.records.join("direct.jsonl")),
        ..fleet.configs[0].clone()
    };
    let mut cmd = tokio::process::Command::new(&fleet.fake);
    cmd.env_clear()
        .envs(base_env())
        .env(fake_mcp::CONFIG_ENV, config.to_json());
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .context("spawn the fake")?;
    Ok(quiet().serve(transport).await?)
}

/// mcp-hub's unified endpoint: the legacy HTTP+SSE transport at `/mcp`.
async fn hub_client(port: u16) -> Result<Client> {
    use steward::runtime::mcp::remote::{SessionWatch, sse::SseTransport};
    let url = format!("http://127.0.0.1:{port}/mcp");
    let transport = SseTransport::connect(
        reqwest::Client::new(),
        &url,
        Default::default(),
        SessionWatch::new(|_| {}),
    )
    .await
    .map_err(|e| anyhow!("connect to mcp-hub's /mcp: {e}"))?;
    Ok(quiet().serve(transport).await?)
}

async fn call(peer: &Peer<RoleClient>, name: &str) -> Result<()> {
    let mut args = serde_json::Map::new();
    args.insert("x".into(), json!(1));
    let r = peer
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(args))
        .await?;
    if r.is_error == Some(true) {
        bail!("{name} answered an error: {:?}", r.content);
    }
    Ok(())
}

/// `warm` calls, then `n` timed sequential calls; the durations in ms.
pub(super) async fn latency(
    peer: &Peer<RoleClient>,
    name: &str,
    warm: usize,
    n: usize,
) -> Result<Vec<f64>> {
    for _ in 0..warm {
        call(peer, name).await?;
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        call(peer, name).await?;
        out.push(ms(t.elapsed()));
    }
    Ok(out)
}

/// Calls per second of `peers` calling in a loop for `window`.
async fn throughput(peers: Vec<Peer<RoleClient>>, name: &str, window: Duration) -> Result<f64> {
    let done = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let until = t0 + window;
    let mut tasks = Vec::new();
    for peer in peers {
        let (done, name) = (done.clone(), name.to_owned());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < until {
                call(&peer, &name).await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<(), anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64())
}

pub(super) fn lat_json(v: &[f64]) -> Value {
    let s = summarize(v);
    json!({"n": v.len(), "p50Ms": r3(s.p50), "p99Ms": r3(pct(&sorted(v), 99.0)), "maxMs": r3(s.max)})
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

pub(super) fn gateway(ctx: &Ctx) -> Result<(Value, serde_json::Map<String, Value>)> {
    let quick = ctx.opts.quick;
    let n = if quick { 10 } else { 100 };
    let (warm, calls) = if quick { (50, 300) } else { (300, 3000) };
    let window = Duration::from_secs(if quick { 1 } else { 5 });
    let edits = if quick { 2 } else { 10 };
    // reqwest is built without a default TLS provider (as in the controller).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let extra = ["--mcp-listen".to_owned(), "127.0.0.1:0".to_owned()];
    let mut r = start_steward_with(ctx, n, true, &FakeMcpConfig::default(), &extra)?;
    let url = r
        .stw
        .status()?
        .controller
        .gateway
        .and_then(|g| g.listen)
        .ok_or_else(|| anyhow!("the controller reports no HTTP address"))?;
    let env = &r.sb.env;
    let mut out = serde_json::Map::new();
    let mut targets = serde_json::Map::new();

    progress(format!("gateway: latency, {calls} calls per transport"));
    let (tx, rx) = mpsc::channel();
    let (direct_lat, stdio_lat, http_lat, stdio) = rt.block_on(async {
        let direct = direct_client(&r.fleet).await?;
        let direct_lat = latency(direct.peer(), "echo", warm, calls).await?;
        let stdio = stdio_client(
            ctx,
            env,
            Agent {
                changed: Some(Arc::new(Mutex::new(tx))),
            },
        )
        .await?;
        let stdio_lat = latency(stdio.peer(), TOOL, warm, calls).await?;
        let http = http_client(&url).await?;
        let http_lat = latency(http.peer(), TOOL, warm, calls).await?;
        direct.cancel().await?;
        http.cancel().await?;
        Ok::<_, anyhow::Error>((direct_lat, stdio_lat, http_lat, stdio))
    })?;
    let (d, s, h) = (
        summarize(&direct_lat).p50,
        summarize(&stdio_lat).p50,
        summarize(&http_lat).p50,
    );
    let p99 = |v: &[f64]| pct(&sorted(v), 99.0);
    out.insert(
        "latency".into(),
        json!({
            "direct": lat_json(&direct_lat),
            "stdio": lat_json(&stdio_lat),
            "http": lat_json(&http_lat),
            "addedP50Ms": {"stdio": r3(s - d), "http": r3(h - d)},
            "addedP99Ms": {"stdio": r3(p99(&stdio_lat) - p99(&direct_lat)),
                            "http": r3(p99(&http_lat) - p99(&direct_lat))},
        }),
    );
    targets.insert(
        "gatewayAddedP50StdioMs".into(),
        target(json!(r3(s - d)), "<= 0.2", Some(s - d <= 0.2)),
    );

    progress(format!("gateway: 10 clients at {n} servers (RSS)"));
    let rss = rt.block_on(async {
        let mut clients = Vec::new();
        for i in 0..10 {
            let c = if i % 2 == 0 {
                stdio_client(ctx, env, quiet()).await?
            } else {
                http_client(&url).await?
            };
            let tools = c.peer().list_all_tools().await?;
            if tools.len() < n {
                bail!("a client lists {} tools for {n} servers", tools.len());
            }
            for _ in 0..10 {
                call(c.peer(), TOOL).await?;
            }
            clients.push(c);
        }
        let rss = (
            status_kb(r.stw.pid, "VmRSS:"),
            status_kb(r.stw.pid, "VmHWM:"),
        );
        for c in clients {
            c.cancel().await?;
        }
        Ok::<_, anyhow::Error>(rss)
    })?;
    let rss_mb = rss.0.map(|k| k as f64 / 1024.0);
    out.insert(
        "rssWith10Clients".into(),
        json!({"servers": n, "clients": "5 stdio + 5 http, each listed and called 10 times",
               "vmRssMb": mb(rss.0), "vmHwmMb": mb(rss.1)}),
    );
    if let Some(m) = rss_mb {
        targets.insert(
            format!("gatewayRss10ClientsN{n}Mb"),
            target(json!(r1(m)), "<= 40", Some(m <= 40.0)),
        );
    }

    progress(format!(
        "gateway: throughput, 8 clients, {} s per transport",
        window.as_secs()
    ));
    let tput = rt.block_on(async {
        let direct = direct_client(&r.fleet).await?;
        let direct_cps = throughput(vec![direct.peer().clone(); 8], "echo", window).await?;
        direct.cancel().await?;
        let mut out = vec![("direct", direct_cps)];
        for transport in ["stdio", "http"] {
            let mut clients = Vec::new();
            for _ in 0..8 {
                clients.push(if transport == "stdio" {
                    stdio_client(ctx, env, quiet()).await?
                } else {
                    http_client(&url).await?
                });
            }
            let peers = clients.iter().map(|c| c.peer().clone()).collect();
            out.push((transport, throughput(peers, TOOL, window).await?));
            for c in clients {
                c.cancel().await?;
            }
        }
        Ok::<_, anyhow::Error>(out)
    })?;
    out.insert(
        "throughput8Clients".into(),
        json!({
            "callsPerS": tput.iter().map(|(k, v)| ((*k).to_owned(), json!(r1(*v)))).collect::<serde_json::Map<_,_>>(),
            "windowS": window.as_secs(),
            "how": "direct: 8 tasks on one connection to one fake; stdio/http: 8 clients of the \
                    endpoint calling the same server",
        }),
    );

    progress(format!("gateway: save -> list_changed, {edits} edits"));
    let (mut changed_ms, mut reload_ms) = (Vec::new(), Vec::new());
    let mut last = Instant::now();
    for k in 0..edits {
        let idx = 1 + k % (n - 1);
        let name = r.fleet.names[idx].clone();
        let old = r.baseline.get(&name).copied().flatten();
        sleep_until(ctx.next_edit_at(last));
        while rx.try_recv().is_ok() {}
        r.fleet.configs[idx].tools = vec!["echo".into(), format!("extra{k}")];
        let t0 = write_by_rename(&r.settings, &r.fleet.content(false), 10 + k as u64)?;
        last = t0;
        let (t_ready, st) = r.obs()?.wait(&format!("{name} Ready again"), |_, s| {
            mcp(s, &name).is_some_and(|m| fresh_ready(m) && m.status.pid != old)
        })?;
        r.baseline = pids(&st);
        let t_changed = rx
            .recv_timeout(DEADLINE)
            .map_err(|_| anyhow!("no tools/list_changed after the edit of {name}"))?;
        reload_ms.push(ms(t_ready - t0));
        changed_ms.push(ms(t_changed - t0));
    }
    let (c, l) = (summarize(&changed_ms).p50, summarize(&reload_ms).p50);
    out.insert(
        "saveToListChanged".into(),
        json!({"edits": edits, "saveToListChanged": summary_ms(&changed_ms),
               "saveToReady": summary_ms(&reload_ms),
               "how": "a tool added to one server; list_changed timestamped on receipt by a \
                       `steward mcp` client; Ready from the watch stream"}),
    );
    targets.insert(
        "saveToListChangedP50Ms".into(),
        target(
            json!({"listChangedMs": r1(c), "reloadMs": r1(l)}),
            "listChanged <= reload + 50",
            Some(c <= l + 50.0),
        ),
    );
    rt.block_on(stdio.cancel())?;
    out.insert("teardown".into(), r.finish());

    // mcp-hub's endpoint on the same fakes, the controller stopped.
    if !ctx.opts.no_mcp_hub {
        progress("gateway: mcp-hub /mcp");
        let (exe, _) = mcp_hub::find_mcp_hub(&ctx.opts)?;
        let mut run = mcp_hub::start_hub_with(&exe, ctx, n, &FakeMcpConfig::default())?;
        let port = run.hub.port;
        let hub = rt.block_on(async {
            let c = hub_client(port).await?;
            let lat = latency(c.peer(), TOOL, warm, calls / 3).await?;
            let mut clients = Vec::new();
            for _ in 0..8 {
                clients.push(hub_client(port).await?);
            }
            let peers = clients.iter().map(|c| c.peer().clone()).collect();
            let cps = throughput(peers, TOOL, window).await?;
            for c in clients {
                c.cancel().await?;
            }
            c.cancel().await?;
            Ok::<_, anyhow::Error>((lat, cps))
        });
        run.hub.terminate();
        run.sb.reap_fakes();
        let (hub_lat, hub_cps) = hub?;
        let m = summarize(&hub_lat).p50;
        out.insert(
            "mcpHub".into(),
            json!({"latency": lat_json(&hub_lat), "addedP50Ms": r3(m - d),
                   "throughput8ClientsCallsPerS": r1(hub_cps),
                   "ratioAddedP50StdioOverMcpHub": r3((s - d) / (m - d)),
                   "ratioAddedP50HttpOverMcpHub": r3((h - d) / (m - d))}),
        );
    }
    Ok((Value::Object(out), targets))
}

/// Words the search scenario's tool names and queries are made of.
const WORDS: [&str; 24] = [
    "create",
    "issue",
    "list",
    "pull",
    "request",
    "read",
    "file",
    "write",
    "query",
    "table",
    "send",
    "message",
    "search",
    "web",
    "fetch",
    "page",
    "commit",
    "branch",
    "event",
    "calendar",
    "image",
    "resize",
    "translate",
    "weather",
];

/// Scenario `search`: `search_tools` through `steward mcp --expose search`
/// (stdio, end to end) over 10 fakes of 100 tools each (1000 tools; quick:
/// 10 x 20), names made of [`WORDS`]. The first search builds the index.
pub(super) fn search(ctx: &Ctx) -> Result<(Value, serde_json::Map<String, Value>)> {
    let quick = ctx.opts.quick;
    let (servers, per) = if quick { (10, 20) } else { (10, 100) };
    let (warm, calls) = if quick { (20, 200) } else { (100, 2000) };
    let w = |i: usize| WORDS[i % WORDS.len()];
    let base = FakeMcpConfig {
        tools: (0..per)
            .map(|i| format!("{}_{}_{i}", w(i), w(i / WORDS.len() + 7)))
            .collect(),
        ..FakeMcpConfig::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let r = start_steward_with(ctx, servers, true, &base, &[])?;
    let env = &r.sb.env;
    progress(format!(
        "search: {calls} searches over {} tools",
        servers * per
    ));
    let (first, lat, listed) = rt.block_on(async {
        let client = stdio_client_with(ctx, env, quiet(), &["--expose", "search"]).await?;
        let listed = client.peer().list_all_tools().await?.len();
        let query = |i: usize| {
            let mut args = serde_json::Map::new();
            args.insert(
                "query".into(),
                json!(format!("{} the {} {}", w(i), w(i + 5), w(i + 11))),
            );
            CallToolRequestParams::new("search_tools").with_arguments(args)
        };
        let t = Instant::now();
        let r = client.peer().call_tool(query(0)).await?;
        let first = ms(t.elapsed());
        if r.is_error == Some(true) {
            bail!("search_tools answered an error: {:?}", r.content);
        }
        for i in 0..warm {
            client.peer().call_tool(query(i)).await?;
        }
        let mut lat = Vec::with_capacity(calls);
        for i in 0..calls {
            let t = Instant::now();
            client.peer().call_tool(query(i)).await?;
            lat.push(ms(t.elapsed()));
        }
        client.cancel().await?;
        Ok::<_, anyhow::Error>((first, lat, listed))
    })?;
    drop(r);
    let p50 = summarize(&lat).p50;
    let mut targets = serde_json::Map::new();
    targets.insert(
        "searchToolsP50MsAt1000Tools".into(),
        target(json!(r3(p50)), "<= 1", (!quick).then_some(p50 <= 1.0)),
    );
    Ok((
        json!({
            "tools": servers * per,
            "listedBySearchClient": listed,
            "firstSearchMs": r3(first),
            "searchTools": lat_json(&lat),
        }),
        targets,
    ))
}

//! Scenario `dev` of `steward-bench`: a server author's save → a connected
//! agent sees the new tool list (issue 28), for a server without a build,
//! one with a trivial build, and — beside them — the same change made by a
//! configuration edit.
//!
//! One controller, three fakes reading their tools at start: `nobuild`
//! from its watched file (`dev.watch` names it), `build` from a file its
//! `dev.build` copies from the watched one (`out/` is never watched), and
//! `config` from its entry (the edit rewrites `settings.json` by rename);
//! and `py`, a real Python server on the PyPI `mcp` SDK (the peers' venv),
//! whose `server.py` each save rewrites with one more tool function (its
//! start, about a second of Python imports, is part of its figure).
//! An rmcp client runs `steward mcp` and timestamps
//! `notifications/tools/list_changed` on receipt. Each save writes the
//! watched file by rename with one more tool; the clock starts right
//! before the rename and stops when the client has `list_changed` and,
//! again, when its `tools/list` holds the new tool. Saves are spaced as the
//! other scenarios' edits (debounce + 100 ms after the last one settled).
//!
//! mcp-hub 4.2.1 has the same `dev` block (without a build): the same
//! fake and saves under mcp-hub's `--watch` and dev mode, with an rmcp client
//! on its `/mcp` endpoint (legacy SSE), which lists until the new tool is
//! there (and notes `list_changed` if one comes).
//!
//! A source change is debounced trailing-only (the first event of a burst
//! starts the window; the change is judged once the files are quiet), so
//! its latency includes the window (`debounceMs`), while a configuration
//! edit that parses is applied at its first event.

use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::service::NotificationContext;

use super::*;

/// Timestamps `tools/list_changed` on receipt.
#[derive(Clone)]
struct Timestamps(Arc<Mutex<mpsc::Sender<Instant>>>);

impl rmcp::ClientHandler for Timestamps {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let t = Instant::now();
        let _ = self.0.lock().unwrap_or_else(|e| e.into_inner()).send(t);
    }
}

fn overlay(tools: &[String]) -> String {
    json!({ "tools": tools }).to_string()
}

/// A Python server on the PyPI `mcp` SDK offering `t` and `tools`.
fn python_server(tools: &[String]) -> String {
    let mut text = String::from("from mcp.server import MCPServer\n\napp = MCPServer(\"py\")\n");
    for tool in tools {
        text.push_str(&format!(
            "\n\n@app.tool()\ndef {tool}() -> str:\n    \"\"\"{tool}.\"\"\"\n    return \"{tool}\"\n"
        ));
    }
    text.push_str("\n\nif __name__ == \"__main__\":\n    app.run()\n");
    text
}

/// The fleet's settings plus the Python server `py` (`python` runs it).
fn settings(fleet: &Fleet, python: &Path) -> Result<String> {
    let mut doc: Value = serde_json::from_str(&fleet.content(false))?;
    doc["mcpServers"]["py"] = json!({
        "command": python.to_string_lossy(),
        "args": ["-B", "py/server.py"],
        "dev": {"watch": "py/*.py"},
    });
    Ok(doc.to_string())
}

pub(super) fn dev(ctx: &Ctx) -> Result<(Value, serde_json::Map<String, Value>)> {
    let saves = if ctx.opts.quick { 4 } else { 24 };
    let sb = GuardedEnv::new();
    let ws = sb.env.ws.clone();
    let first = vec!["t".to_owned()];
    for file in ["src/nobuild.json", "src/build.json", "out/build.json"] {
        write_by_rename(&ws.join(file), &overlay(&first), 0)?;
    }
    let base = FakeMcpConfig {
        tools: first.clone(),
        ..FakeMcpConfig::default()
    };
    let mut fleet = Fleet::with(&ctx.fake, &sb.env.records(), 0, &base);
    let with_overlay = |file: &str| FakeMcpConfig {
        overlay_file: Some(ws.join(file)),
        ..base.clone()
    };
    let nobuild = fleet.push("nobuild", &with_overlay("src/nobuild.json"));
    fleet
        .dev
        .insert(nobuild, json!({"watch": "src/nobuild.json"}));
    let build = fleet.push("build", &with_overlay("out/build.json"));
    fleet.dev.insert(
        build,
        json!({"watch": "src/build.json", "build": "cp src/build.json out/build.json"}),
    );
    let config = fleet.push("config", &base);
    let python = first_list::peers_dir().join("venv/bin/python");
    if !python.is_file() {
        bail!(
            "{} is not installed (the PyPI mcp SDK's venv; set STEWARD_PEERS_DIR)",
            python.display()
        );
    }
    write_by_rename(&ws.join("py/server.py"), &python_server(&first), 0)?;
    let settings_file = sb.env.home.join("settings.json");
    write_by_rename(&settings_file, &settings(&fleet, &python)?, 0)?;
    let mut stw = Stw::spawn(ctx, &sb.env, &[])?;
    let mut obs = stw.observe(ctx.opts.observe)?;
    let every_ready = |s: &WorkspaceStatus| {
        s.items.len() == 4
            && s.items
                .iter()
                .all(|i| matches!(i, Item::McpServer(m) if fresh_ready(m)))
    };
    obs.wait("4 servers Ready", |_, s| every_ready(s))?;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (tx, rx) = mpsc::channel();
    let (mut child, client, reg) =
        rt.block_on(agent(ctx, &sb.env, Timestamps(Arc::new(Mutex::new(tx)))))?;

    let mut out = serde_json::Map::new();
    let mut p50 = BTreeMap::new();
    let mut last = Instant::now();
    let mut seq = 1;
    // `py` is not in the fleet: it gets the next index.
    let py = fleet.len();
    for (label, idx) in [
        ("withoutBuild", nobuild),
        ("withBuild", build),
        ("configEdit", config),
        ("pythonWithoutBuild", py),
    ] {
        let name = fleet
            .names
            .get(idx)
            .cloned()
            .unwrap_or_else(|| "py".to_owned());
        progress(format!("dev: {label}, {saves} saves"));
        let (mut changed_ms, mut listed_ms) = (Vec::new(), Vec::new());
        let mut tools = first.clone();
        for k in 0..saves {
            tools.push(format!("v{k}"));
            let wanted = format!("{name}__v{k}");
            sleep_until(ctx.next_edit_at(last));
            while rx.try_recv().is_ok() {}
            seq += 1;
            let t0 = if idx == config {
                fleet.configs[idx].tools = tools.clone();
                write_by_rename(&settings_file, &settings(&fleet, &python)?, seq)?
            } else if idx == py {
                write_by_rename(&ws.join("py/server.py"), &python_server(&tools), seq)?
            } else {
                let watched = if idx == nobuild {
                    "src/nobuild.json"
                } else {
                    "src/build.json"
                };
                write_by_rename(&ws.join(watched), &overlay(&tools), seq)?
            };
            let t_changed = rx
                .recv_timeout(DEADLINE)
                .map_err(|_| anyhow!("no tools/list_changed after the save {k} of {name}"))?;
            let listed = rt.block_on(client.peer().list_all_tools())?;
            let t_listed = Instant::now();
            if !listed.iter().any(|t| t.name == wanted) {
                bail!("{name}: list_changed came, but the list lacks {wanted}");
            }
            changed_ms.push(ms(t_changed - t0));
            listed_ms.push(ms(t_listed - t0));
            // The next save is spaced from the moment this one settled.
            last = t_listed;
        }
        p50.insert(label, summarize(&listed_ms).p50);
        out.insert(
            label.into(),
            json!({
                "saves": saves,
                "saveToListChanged": summary_ms(&changed_ms),
                "saveToNewToolListed": summary_ms(&listed_ms),
            }),
        );
    }
    let s = stw.status()?;
    let reloads: BTreeMap<String, Value> = [nobuild, build]
        .into_iter()
        .map(|i| {
            let name = &fleet.names[i];
            let dev = s.items.iter().find_map(|item| match item {
                Item::McpServer(m) if &m.metadata.name == name => m.status.dev.clone(),
                _ => None,
            });
            (
                name.clone(),
                json!({
                    "reloads": dev.as_ref().map_or(0, |d| d.reloads),
                    "lastBuildMs": dev.and_then(|d| d.last_build).map(|b| b.duration_ms),
                }),
            )
        })
        .collect();
    out.insert("devStatus".into(), json!(reloads));
    out.insert("debounceMs".into(), json!(ctx.debounce.as_millis() as u64));
    out.insert(
        "how".into(),
        json!(
            "save = rename of the watched file with one more tool (config: of settings.json); \
               clock from right before the rename to list_changed at a `steward mcp` client and \
               to its tools/list holding the new tool"
        ),
    );
    let closed = rt.block_on(async {
        let _ = client.cancel().await;
        tokio::time::timeout(DEADLINE, child.wait()).await
    });
    unregister(reg);
    drop(obs);
    let clean = stw.terminate();
    let killed = sb.reap_fakes();
    out.insert(
        "teardown".into(),
        json!({"controllerExitedCleanly": clean, "fakesKilled": killed,
               "stewardMcpExited": matches!(closed, Ok(Ok(_)))}),
    );
    if !ctx.opts.no_mcp_hub {
        let hub = hub_dev(ctx, saves);
        out.insert(
            "mcpHubWithoutBuild".into(),
            hub.unwrap_or_else(|e| json!({"error": format!("{e:#}")})),
        );
    }
    let mut targets = serde_json::Map::new();
    let (nb, cfg) = (p50["withoutBuild"], p50["configEdit"]);
    let window = ms(ctx.debounce);
    targets.insert(
        "devSaveToNewToolListedP50Ms".into(),
        target(
            json!({"withoutBuild": r1(nb), "configEdit": r1(cfg), "debounceMs": r1(window)}),
            "withoutBuild <= configEdit + debounce + 100",
            Some(nb <= cfg + window + 100.0),
        ),
    );
    Ok((Value::Object(out), targets))
}

/// The `withoutBuild` saves under mcp-hub's dev mode (see the module docs).
fn hub_dev(ctx: &Ctx, saves: usize) -> Result<Value> {
    use steward::runtime::mcp::remote::{SessionWatch, sse::SseTransport};
    let (exe, version) = mcp_hub::find_mcp_hub(&ctx.opts)?;
    let sb = GuardedEnv::new();
    let ws = sb.env.ws.clone();
    let watched = ws.join("src/nobuild.json");
    let first = vec!["t".to_owned()];
    write_by_rename(&watched, &overlay(&first), 0)?;
    let base = FakeMcpConfig {
        tools: first.clone(),
        overlay_file: Some(watched.clone()),
        ..FakeMcpConfig::default()
    };
    let mut fleet = Fleet::with(&ctx.fake, &sb.env.records(), 0, &base);
    let idx = fleet.push("nobuild", &base);
    fleet.dev.insert(
        idx,
        json!({"enabled": true, "watch": ["src/nobuild.json"], "cwd": ws.to_string_lossy()}),
    );
    let config = sb.env.root.path().join("mcp-hub.json");
    write_by_rename(&config, &fleet.content(false), 0)?;
    let mut hub = mcp_hub::Hub::spawn(&exe, &config, sb.env.root.path())?;
    let deadline = Instant::now() + DEADLINE;
    loop {
        hub.check_running()?;
        if hub.status_of("nobuild").is_ok_and(|s| s == "connected") {
            break;
        }
        let log = std::fs::read_to_string(&hub.log).unwrap_or_default();
        if log.contains("DEV_WATCHER_START_ERROR") {
            // 4.2.1 lists the globs with `fs/promises.glob`, which Node has
            // from 22 on: on an older Node its dev mode cannot start.
            let why = log
                .lines()
                .find(|l| l.contains("DEV_WATCHER_START_ERROR"))
                .unwrap_or_default()
                .to_owned();
            hub.terminate();
            sb.reap_fakes();
            return Ok(json!({
                "mcpHub": version,
                "unavailable": "mcp-hub's dev watcher does not start on this Node (it needs fs/promises glob, Node 22+)",
                "log": why,
            }));
        }
        if Instant::now() > deadline {
            bail!("mcp-hub did not connect the server\n{}", hub.log_tail());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (tx, rx) = mpsc::channel();
    let url = format!("http://127.0.0.1:{}/mcp", hub.port);
    let client = rt.block_on(async {
        use rmcp::ServiceExt as _;
        let transport = SseTransport::connect(
            reqwest::Client::new(),
            &url,
            Default::default(),
            SessionWatch::new(|_| {}),
        )
        .await
        .map_err(|e| anyhow!("connect to mcp-hub's /mcp: {e}"))?;
        Ok::<_, anyhow::Error>(
            Timestamps(Arc::new(Mutex::new(tx)))
                .serve(transport)
                .await?,
        )
    })?;
    progress(format!("dev: mcp-hub, {saves} saves"));
    let (mut listed_ms, mut changed_ms) = (Vec::new(), Vec::new());
    let mut tools = first;
    let mut last = Instant::now();
    for k in 0..saves {
        tools.push(format!("v{k}"));
        let wanted = format!("v{k}");
        // mcp-hub debounces dev changes for 500 ms: spaced past that.
        sleep_until(last + Duration::from_millis(500) + SPACING_MARGIN);
        while rx.try_recv().is_ok() {}
        let t0 = write_by_rename(&watched, &overlay(&tools), 1 + k as u64)?;
        let limit = t0 + DEADLINE;
        let t_listed = loop {
            let listed = rt.block_on(client.peer().list_all_tools())?;
            if listed.iter().any(|t| t.name.ends_with(&wanted)) {
                break Instant::now();
            }
            if Instant::now() > limit {
                bail!("mcp-hub's /mcp never listed {wanted}\n{}", hub.log_tail());
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        if let Ok(t) = rx.try_recv() {
            changed_ms.push(ms(t - t0));
        }
        listed_ms.push(ms(t_listed - t0));
        last = t_listed;
    }
    let _ = rt.block_on(client.cancel());
    hub.terminate();
    sb.reap_fakes();
    Ok(json!({
        "mcpHub": version,
        "saves": saves,
        "saveToNewToolListed": summary_ms(&listed_ms),
        "listChangedReceived": changed_ms.len(),
        "saveToListChanged": summary_ms(&changed_ms),
        "how": "mcp-hub --watch with dev {enabled, watch, cwd}; an rmcp client on its /mcp \
                (legacy SSE) lists every 5 ms until the new tool is there",
    }))
}

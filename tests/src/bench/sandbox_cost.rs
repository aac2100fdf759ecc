//! Scenario `sandbox-cost` of `steward-bench`: what the sandbox costs
//! servers started by an interpreter, and at scale (issue "the sandbox
//! holds over time": its private homes and pinned paths are more of every
//! spawn).
//!
//! - `interpreted`: one Python fake (`assets/fake_mcp.py`, standard library
//!   only, started through its `#!/usr/bin/env python3` line) restarted
//!   [`STARTS`] times with `steward restart`, under `standard` and under
//!   `off` (one controller each): p50/p95 and the added p50;
//!   `interpretedNode`: the same with its Node twin (`assets/fake_mcp.mjs`,
//!   `#!/usr/bin/env node`).
//! - `scale`: N Python fakes (500; quick 20), under `standard` then `off`:
//!   the cold start to all Ready, then [`EDITS`] edits (write → the edited
//!   server Ready under a new pid, p50/p95) while another thread runs
//!   `steward status -o json` back to back (its wall time: median, p95,
//!   max), and `steward status` of the idle controller afterwards.
//! - `firstStart` (not with `--quick`; needs the registries): a real `npx`
//!   server (`server-everything`) and a real `uvx` one (`mcp-server-time`),
//!   pinned as in `.ci/run`, from `steward run` to Ready: with a cold private
//!   cache (a fresh HOME_DIR each of [`FIRST_RUNS`] times), with the warm
//!   private cache (a second `steward run` of the same HOME_DIR and
//!   workspace), and as before private homes — the
//!   user's shared, warm `~/.npm` / `~/.cache/uv`, profile `off`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

const STARTS: usize = 30;
const EDITS: usize = 24;
const IDLE_STATUS: usize = 30;
const FIRST_RUNS: usize = 3;

/// A package runner's server as the README tells to write it.
struct Runner {
    name: &'static str,
    entry: Value,
}

fn runners() -> Result<Vec<Runner>> {
    let peers = repo_root().join(".peers");
    let uvx = peers.join("venv/bin/uvx");
    let npx = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("npx"))
        .find(|p| p.is_file())
        .ok_or_else(|| anyhow!("npx is not on PATH"))?;
    if !uvx.is_file() {
        bail!("{} is missing: run .ci/run", uvx.display());
    }
    Ok(vec![
        Runner {
            name: "npx",
            entry: json!({"command": npx, "args": ["--yes", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"]}),
        },
        Runner {
            name: "uvx",
            entry: json!({"command": uvx, "args": ["--from", "mcp-server-time==2026.10.19", "mcp-server-time"],
                          "env": {"UV_SYSTEM_CERTS": "true"}}),
        },
    ])
}

/// A fresh HOME_DIR and workspace with only `entry` (as server `name`),
/// the user's home `home`.
fn fresh_env(name: &str, entry: &Value, home: &Path, vars: &[(&str, &str)]) -> Result<GuardedEnv> {
    let sb = GuardedEnv::new();
    sb.env.set_var("HOME", &home.to_string_lossy());
    for (k, v) in vars {
        sb.env.set_var(k, v);
    }
    let settings = sb.env.home.join("settings.json");
    std::fs::write(&settings, json!({"mcpServers": {name: entry}}).to_string())?;
    Ok(sb)
}

/// `steward run` in `sb` until `name` is Ready: ms from the spawn, and
/// the running controller.
fn run_until_ready(ctx: &Ctx, name: &str, sb: &GuardedEnv) -> Result<(f64, Stw)> {
    let mut stw = Stw::spawn(ctx, &sb.env, &[])?;
    let mut obs = stw.observe(Observe::Poll)?;
    let (t, _) = obs.wait_for(
        &format!("{name} Ready"),
        Duration::from_secs(300),
        |_, s| mcp(s, name).is_some_and(fresh_ready),
    )?;
    drop(obs);
    Ok((ms(t - stw.spawned), stw))
}

fn first_starts(ctx: &Ctx, off_vars: &[(&str, &str)]) -> Result<Value> {
    let mut out = serde_json::Map::new();
    for runner in runners()? {
        progress(format!(
            "sandbox-cost: first starts of a real {} server",
            runner.name
        ));
        let (mut cold, mut warm, mut shared) = (Vec::new(), Vec::new(), Vec::new());
        let user = GuardedEnv::new();
        let fresh_home = user.env.root.path().join("user-fresh");
        std::fs::create_dir_all(&fresh_home)?;
        for _ in 0..FIRST_RUNS {
            // Cold: a fresh HOME_DIR, so a fresh private home; then warm: a
            // second `steward run` of the same workspace and HOME_DIR finds
            // the private home the first one filled.
            let sb = fresh_env(runner.name, &runner.entry, &fresh_home, &[])?;
            let (t, mut stw) = run_until_ready(ctx, runner.name, &sb)?;
            cold.push(t);
            stw.terminate();
            let (t, mut stw) = run_until_ready(ctx, runner.name, &sb)?;
            warm.push(t);
            stw.terminate();
        }
        // Before private homes: one shared cache (the user's), warmed once.
        let shared_home = user.env.root.path().join("user-shared");
        std::fs::create_dir_all(&shared_home)?;
        for i in 0..=FIRST_RUNS {
            let sb = fresh_env(runner.name, &runner.entry, &shared_home, off_vars)?;
            let (t, mut stw) = run_until_ready(ctx, runner.name, &sb)?;
            if i > 0 {
                shared.push(t);
            }
            stw.terminate();
        }
        out.insert(
            runner.name.to_owned(),
            json!({
                "coldPrivateRunToReady": summary_ms(&cold),
                "warmPrivateRunToReady": summary_ms(&warm),
                "sharedWarmRunToReady": summary_ms(&shared),
            }),
        );
    }
    Ok(Value::Object(out))
}

/// An interpreter's fake server (`text`, with its `#!` line) written to
/// `dir` as `name` and made executable.
fn script_fake(dir: &Path, name: &str, text: &str) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// `runs` restarts of `fake`'s one server (run by `server`, the
/// interpreter) under `standard`, then under
/// `off` (`off_vars`): the JSON of both and the p50 `standard` adds.
fn interpreted(
    fake: &Ctx,
    server: &str,
    off_vars: &[(&str, &str)],
    runs: usize,
) -> Result<(Value, f64)> {
    progress(format!(
        "sandbox-cost: {runs} restarts of a {server} server under standard, then off"
    ));
    let (standard, _) = super::sandbox::restarts(fake, &[], runs)?;
    let (plain, _) = super::sandbox::restarts(fake, off_vars, runs)?;
    let added = summarize(&standard).p50 - summarize(&plain).p50;
    let json = json!({
        "server": format!("{server} (standard library), through its #! line"),
        "restarts": runs,
        "standard": summary_ms(&standard),
        "off": summary_ms(&plain),
        "addedP50Ms": r1(added),
    });
    Ok((json, added))
}

/// `ctx` with `fake` (an interpreter's script) as every server's command.
fn with_fake(ctx: &Ctx, fake: &Path) -> Ctx {
    Ctx {
        opts: ctx.opts.clone(),
        plan: ctx.plan.clone(),
        steward: ctx.steward.clone(),
        fake: fake.to_path_buf(),
        debounce: ctx.debounce,
    }
}

/// How to run `steward status -o json` against a controller from any
/// thread: the executable, the workspace, the environment.
#[derive(Clone)]
struct StatusCommand {
    steward: PathBuf,
    workspace: PathBuf,
    vars: Vec<(String, String)>,
}

impl StatusCommand {
    fn of(ctx: &Ctx, env: &Env) -> StatusCommand {
        StatusCommand {
            steward: ctx.steward.clone(),
            workspace: env.ws.clone(),
            vars: env.steward_env(),
        }
    }
}

/// `steward status -o json`: its wall time.
fn status_once(cmd: &StatusCommand) -> Result<f64> {
    let t0 = Instant::now();
    let out = Command::new(&cmd.steward)
        .arg("--workspace")
        .arg(&cmd.workspace)
        .args(["status", "-o", "json"])
        .env_clear()
        .envs(cmd.vars.iter().cloned())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    if !out.success() {
        bail!("steward status failed");
    }
    Ok(ms(t0.elapsed()))
}

fn status_json(times: &[f64]) -> Value {
    let s = summarize(times);
    let max = times.iter().copied().fold(0.0, f64::max);
    json!({"n": times.len(), "p50": r1(s.p50), "p95": r1(s.p95), "max": r1(max)})
}

/// One level of `scale` (`vars`: the controller's environment).
fn scale_level(ctx: &Ctx, n: usize, edits: usize, vars: &[(&str, &str)]) -> Result<Value> {
    progress(format!("sandbox-cost: {n} Python servers, {edits} edits"));
    let mut r = start_steward_full(ctx, n, true, &FakeMcpConfig::default(), &[], vars)?;
    let cold_ms = r.cold_ms;
    let stop = Arc::new(AtomicBool::new(false));
    let cmd = StatusCommand::of(ctx, &r.sb.env);
    let poller = {
        let stop = stop.clone();
        let cmd = cmd.clone();
        std::thread::spawn(move || {
            let mut times = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if let Ok(t) = status_once(&cmd) {
                    times.push(t);
                }
            }
            times
        })
    };
    let mut ready = Vec::new();
    for (seq, k) in (1u64..).zip(0..edits) {
        let idx = r.fleet.target(k);
        let settings = r.settings.clone();
        let obs = r.obs.as_mut().ok_or_else(|| anyhow!("no observer"))?;
        let s = steward_edit(
            obs,
            &mut r.fleet,
            &settings,
            idx,
            &format!("e{k}"),
            seq,
            &mut r.baseline,
            true,
        )?;
        ready.extend(s.ready_ms);
        sleep_until(ctx.next_edit_at(s.t0));
    }
    stop.store(true, Ordering::Relaxed);
    let during = poller
        .join()
        .map_err(|_| anyhow!("the status poller panicked"))?;
    let idle: Vec<f64> = (0..IDLE_STATUS)
        .map(|_| status_once(&cmd))
        .collect::<Result<_>>()?;
    let status = r.stw.status()?;
    let sandbox = mcp(&status, &r.fleet.names[0])
        .and_then(|m| m.status.sandbox.as_ref())
        .map(|b| json!({"profile": b.profile, "enforcement": b.enforcement}))
        .unwrap_or(Value::Null);
    let teardown = r.finish();
    Ok(json!({
        "servers": n,
        "sandbox": sandbox,
        "coldStartMs": r1(cold_ms),
        "writeToReady": summary_ms(&ready),
        "statusDuringEdits": status_json(&during),
        "statusIdle": status_json(&idle),
        "teardown": teardown,
    }))
}

pub(super) fn sandbox_cost(ctx: &Ctx) -> Result<(Value, serde_json::Map<String, Value>)> {
    let quick = ctx.opts.quick;
    let scratch = GuardedEnv::new();
    let off = super::sandbox::off_defaults(scratch.env.root.path())?;
    let off_path = off.to_string_lossy().into_owned();
    let off_vars = [("QWEN_CODE_SYSTEM_DEFAULTS_PATH", off_path.as_str())];
    let dir = scratch.env.root.path();
    let py = with_fake(
        ctx,
        &script_fake(dir, "fake_mcp.py", include_str!("assets/fake_mcp.py"))?,
    );
    let node = with_fake(
        ctx,
        &script_fake(dir, "fake_mcp.mjs", include_str!("assets/fake_mcp.mjs"))?,
    );
    let runs = if quick { 8 } else { STARTS };
    let (python_json, added) = interpreted(&py, "python3", &off_vars, runs)?;
    let (node_json, node_added) = interpreted(&node, "node", &off_vars, runs)?;

    let n = if quick { 20 } else { 500 };
    let edits = if quick { 4 } else { EDITS };
    let scale_standard = scale_level(&py, n, edits, &[])?;
    let scale_off = scale_level(&py, n, edits, &off_vars)?;
    let first = if quick {
        Value::Null
    } else {
        first_starts(ctx, &off_vars)?
    };
    let p = |v: &Value, k: &str, q: &str| v[k][q].as_f64().unwrap_or(f64::NAN);
    let json = json!({
        "interpreted": python_json,
        "interpretedNode": node_json,
        "firstStart": first,
        "scale": {
            "standard": scale_standard,
            "off": scale_off,
            "reloadRatioP50": r3(p(&scale_standard, "writeToReady", "p50Ms") / p(&scale_off, "writeToReady", "p50Ms")),
        },
    });
    let mut targets = serde_json::Map::new();
    targets.insert(
        "sandboxPythonStartAddedP50Ms<=5".into(),
        json!({"value": r1(added), "met": added <= 5.0}),
    );
    targets.insert(
        "sandboxNodeStartAddedP50Ms<=5".into(),
        json!({"value": r1(node_added), "met": node_added <= 5.0}),
    );
    if !quick {
        let reload = p(&scale_standard, "writeToReady", "p50Ms");
        let status = p(&scale_standard, "statusDuringEdits", "p95");
        targets.insert(
            "sandboxReloadAt500P50Ms<=100".into(),
            json!({"value": reload, "met": reload <= 100.0}),
        );
        targets.insert(
            "sandboxStatusAt500P95Ms<=30".into(),
            json!({"value": status, "met": status <= 30.0}),
        );
    }
    Ok((json, targets))
}

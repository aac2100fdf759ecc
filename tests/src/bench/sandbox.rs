//! Scenario `sandbox` of `steward-bench`: what least privilege costs.
//!
//! - `starts`: one fake server restarted [`STARTS`] times with `steward
//!   restart` (which answers once it is Ready again), under the default
//!   profile (`standard`) and with `steward.sandbox.default: "off"` (set in
//!   the system-defaults layer), one controller each; the wall time of each
//!   restart, p50/p95, and the difference of the p50s: the sandbox's added
//!   start cost (a namespace, the Landlock rules — `standard` lists the
//!   directories above the credential stores —, seccomp).
//! - `shim`: the same cost without the controller around it: the exec shim
//!   running `/bin/true` with a `standard` plan (built by the controller's
//!   own code) and without one, [`SHIM_RUNS`] times each.
//! - `reload`: reload latency at N servers (`--reload-ns`' largest, 100 by
//!   default) under `standard` and under `off`, as the `reload` scenario
//!   measures it.
//! - `proxy`: an allowed `CONNECT` through a server's egress proxy against a
//!   direct connection to the same loopback server (time to the first byte
//!   of the answer, p50 over [`PROXY_RUNS`]), and the throughput of one
//!   [`DOWNLOAD_MB`] MiB download each way.

use std::io::{Read, Write};

use super::*;

const STARTS: usize = 50;
const SHIM_RUNS: usize = 100;
const PROXY_RUNS: usize = 200;
const DOWNLOAD_MB: usize = 64;

/// The system-defaults file that turns the sandbox off.
pub(super) fn off_defaults(dir: &Path) -> Result<PathBuf> {
    let path = dir.join("system-defaults-off.json");
    std::fs::write(&path, r#"{"steward": {"sandbox": {"default": "off"}}}"#)?;
    Ok(path)
}

/// `steward restart s000` `runs` times: the wall time of each, in ms.
pub(super) fn restarts(ctx: &Ctx, vars: &[(&str, &str)], runs: usize) -> Result<(Vec<f64>, Value)> {
    let r = start_steward_full(ctx, 1, false, &FakeMcpConfig::default(), &[], vars)?;
    let status = r.stw.status()?;
    let sandbox = mcp(&status, "s000")
        .and_then(|m| m.status.sandbox.as_ref())
        .map(|b| json!({"profile": b.profile, "enforcement": b.enforcement}))
        .unwrap_or(Value::Null);
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t0 = Instant::now();
        let out =
            r.sb.env
                .command(&["restart", "s000"])
                .stdout(Stdio::null())
                .output()?;
        if !out.status.success() {
            bail!(
                "steward restart failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        times.push(ms(t0.elapsed()));
    }
    Ok((times, sandbox))
}

/// The exec shim running `/bin/true`, `runs` times, with `plan` (JSON) or
/// without: the wall time of each, in ms.
fn shim_runs(ctx: &Ctx, plan: Option<&str>, runs: usize) -> Result<Vec<f64>> {
    let me = std::process::id().to_string();
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let mut cmd = Command::new(&ctx.steward);
        cmd.args(["__steward-exec", &me, "/bin/true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(plan) = plan {
            cmd.env(steward::runtime::sandbox::PLAN_VAR, plan);
        }
        let t0 = Instant::now();
        let out = cmd.output()?;
        times.push(ms(t0.elapsed()));
        if !out.status.success() {
            bail!("the shim failed: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    Ok(times)
}

/// A `standard` plan for `/bin/true`, as the controller would make it.
fn standard_plan(ctx: &Ctx, env: &Env) -> Result<String> {
    use steward::runtime::sandbox::{Support, plan};
    let support = Support::detect(&ctx.steward);
    let tmp = env.root.path().join("sbx-tmp");
    std::fs::create_dir_all(&tmp)?;
    let private_home = env.home.join("steward/sandbox/bench/mcp-bench");
    std::fs::create_dir_all(&private_home)?;
    let lookup = |k: &str| std::env::var(k).ok();
    let facts = plan::Facts {
        home: Some(&env.home),
        home_dir: &env.home,
        workspace: &env.ws,
        hidden: &[],
        program: Path::new("/bin/true"),
        args: &[],
        cwd: &env.ws,
        tmpdir: &tmp,
        private_home: Some(&private_home),
        env: &lookup,
    };
    let built = plan::build(
        &steward_schema::sandbox::Sandbox::standard(),
        support,
        &facts,
    )
    .ok_or_else(|| anyhow!("standard has a plan"))?;
    Ok(serde_json::to_string(&built.plan)?)
}

/// A loopback server that answers each connection's first line with
/// `bytes` bytes.
fn payload_server(bytes: usize) -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        let chunk = vec![b'x'; 64 * 1024];
        for stream in listener.incoming().flatten() {
            std::thread::spawn({
                let chunk = chunk.clone();
                move || {
                    let mut stream = stream;
                    let mut line = [0u8; 256];
                    let _ = stream.read(&mut line);
                    let mut left = bytes;
                    while left > 0 {
                        let n = left.min(chunk.len());
                        if stream.write_all(&chunk[..n]).is_err() {
                            return;
                        }
                        left -= n;
                    }
                }
            });
        }
    });
    Ok(port)
}

/// Connect (directly, or through the proxy at `proxy` with `CONNECT`), ask,
/// and read `expect` bytes: (ms to the first byte, ms to the last).
fn fetch(port: u16, proxy: Option<u16>, expect: usize) -> Result<(f64, f64)> {
    let t0 = Instant::now();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", proxy.unwrap_or(port)))?;
    s.set_nodelay(true)?;
    if proxy.is_some() {
        s.write_all(
            format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n")
                .as_bytes(),
        )?;
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            s.read_exact(&mut byte)?;
            head.push(byte[0]);
        }
        if !head.starts_with(b"HTTP/1.1 200") {
            bail!("the proxy refused: {}", String::from_utf8_lossy(&head));
        }
    }
    s.write_all(b"GET / HTTP/1.1\r\n\r\n")?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0;
    let mut first = None;
    while got < expect {
        let n = s.read(&mut buf)?;
        if n == 0 {
            bail!("the stream ended after {got} of {expect} bytes");
        }
        first.get_or_insert_with(|| ms(t0.elapsed()));
        got += n;
    }
    Ok((first.unwrap_or_default(), ms(t0.elapsed())))
}

fn proxy(quick: bool) -> Result<Value> {
    use steward::runtime::sandbox::{plan::Egress, proxy::Proxy};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let small = payload_server(1)?;
    let mb = if quick { 8 } else { DOWNLOAD_MB };
    let large = payload_server(mb << 20)?;
    let egress = Egress {
        hosts: vec!["127.0.0.1".to_owned()],
        ports: vec![],
    };
    let proxy = rt.block_on(Proxy::start(egress, None))?;
    let runs = if quick { 20 } else { PROXY_RUNS };
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        direct.push(fetch(small, None, 1)?.0);
        proxied.push(fetch(small, Some(proxy.port()), 1)?.0);
    }
    let mbps = |total_ms: f64| r1(mb as f64 / (total_ms / 1000.0));
    let direct_big = fetch(large, None, mb << 20)?.1;
    let proxied_big = fetch(large, Some(proxy.port()), mb << 20)?.1;
    let (d, p) = (summarize(&direct).p50, summarize(&proxied).p50);
    Ok(json!({
        "firstByteDirect": summary_ms(&direct),
        "firstByteThroughProxy": summary_ms(&proxied),
        "addedLatencyP50Ms": r3(p - d),
        "downloadMb": mb,
        "downloadDirectMbPerS": mbps(direct_big),
        "downloadThroughProxyMbPerS": mbps(proxied_big),
        "proxyThroughputShareOfDirect": r3(direct_big / proxied_big),
    }))
}

pub(super) fn sandbox(ctx: &Ctx) -> Result<(Value, serde_json::Map<String, Value>)> {
    let quick = ctx.opts.quick;
    let scratch = GuardedEnv::new();
    let off = off_defaults(scratch.env.root.path())?;
    let off_path = off.to_string_lossy().into_owned();
    let off_vars = [("QWEN_CODE_SYSTEM_DEFAULTS_PATH", off_path.as_str())];
    let runs = if quick { 10 } else { STARTS };

    progress(format!("sandbox: {runs} restarts under standard, then off"));
    let (standard, standard_status) = restarts(ctx, &[], runs)?;
    let (plain, off_status) = restarts(ctx, &off_vars, runs)?;
    let added = summarize(&standard).p50 - summarize(&plain).p50;

    progress("sandbox: the exec shim alone");
    let plan = standard_plan(ctx, &scratch.env)?;
    let shim_runs_n = if quick { 20 } else { SHIM_RUNS };
    let shim_plain = shim_runs(ctx, None, shim_runs_n)?;
    let shim_standard = shim_runs(ctx, Some(&plan), shim_runs_n)?;

    let n = *ctx.plan.reload_ns.iter().max().unwrap_or(&100);
    progress(format!("sandbox: reload at {n} servers, standard then off"));
    let reload_standard = reload::reload_level_with(ctx, n, 0, &[])?;
    let reload_off = reload::reload_level_with(ctx, n, 0, &off_vars)?;
    let (rs, ro) = (
        summarize(&reload_standard.ready).p50,
        summarize(&reload_off.ready).p50,
    );

    progress("sandbox: the egress proxy");
    let proxy = proxy(quick)?;

    let json = json!({
        "starts": {
            "restarts": runs,
            "standard": summary_ms(&standard),
            "off": summary_ms(&plain),
            "addedP50Ms": r1(added),
            "standardSandbox": standard_status,
            "offSandbox": off_status,
        },
        "shim": {
            "runs": shim_runs_n,
            "noPlan": summary_ms(&shim_plain),
            "standardPlan": summary_ms(&shim_standard),
            "addedP50Ms": r3(summarize(&shim_standard).p50 - summarize(&shim_plain).p50),
        },
        "reload": {
            "servers": n,
            "standardWriteToReady": summary_ms(&reload_standard.ready),
            "offWriteToReady": summary_ms(&reload_off.ready),
            "ratioP50": r3(rs / ro),
            "standardUnchangedRestarts": reload_standard.unchanged_restarts,
            "offUnchangedRestarts": reload_off.unchanged_restarts,
        },
        "proxy": proxy,
    });
    let mut targets = serde_json::Map::new();
    targets.insert(
        "sandboxStartAddedP50Ms<=5".into(),
        json!({"value": r1(added), "met": added <= 5.0}),
    );
    targets.insert(
        "sandboxReloadUnchangedRestarts==0".into(),
        json!({"value": reload_standard.unchanged_restarts, "met": reload_standard.unchanged_restarts == 0}),
    );
    Ok((json, targets))
}

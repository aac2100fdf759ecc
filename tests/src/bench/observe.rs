//! Scenario `observe` of `steward-bench`: what metrics and traces cost.
//!
//! - idle controller CPU at N fakes (500; quick 50) without and with
//!   `--metrics-listen`, nobody scraping (schedstat over the window);
//! - one scrape of `/metrics` at that N: controller CPU per scrape (20
//!   scrapes, schedstat) and the exposition's size;
//! - the metrics' work on a forwarded call's path (`ToolCall`: clock
//!   reads, a family lookup, a histogram and a counter), timed in this
//!   process over a million calls;
//! - the p50 of a forwarded call (`steward mcp`, sequential calls) with
//!   traces exported to a local OTLP/HTTP receiver, against the same
//!   without an endpoint.

use std::net::TcpListener;

use steward::observe::metrics::{CallResult, ToolCall, Via};

use super::gateway::{TOOL, lat_json, latency, quiet, stdio_client};
use super::*;

/// A loopback port nobody holds (bound, then released).
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// An OTLP/HTTP receiver that accepts every request (and discards it).
fn sink_receiver() -> Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}", listener.local_addr()?);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || {
                let mut writer = match stream.try_clone() {
                    Ok(w) => w,
                    Err(_) => return,
                };
                let mut reader = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut length = 0usize;
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0 {
                            return;
                        }
                        let header = header.trim_end();
                        if header.is_empty() {
                            break;
                        }
                        if let Some((name, value)) = header.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let answer = "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n";
                    if writer.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok(url)
}

/// Controller CPU % over `window`, after the cold start settled.
fn idle_pct(ctx: &Ctx, r: &Running, window: Duration) -> Result<f64> {
    std::thread::sleep(ctx.debounce + Duration::from_millis(500));
    let a = cpu_sample(r.stw.pid)?;
    std::thread::sleep(window);
    let b = cpu_sample(r.stw.pid)?;
    let d = cpu_delta(&a, &b);
    Ok(d.sched_ms / 10.0 / d.wall_s)
}

/// GET /metrics over HTTP/1.0; the body's size.
fn scrape(addr: &str) -> Result<usize> {
    let mut stream = TcpStream::connect(addr)?;
    stream.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    if !text.starts_with("HTTP/1.1 200") && !text.starts_with("HTTP/1.0 200") {
        bail!("scrape answered {:?}", text.lines().next());
    }
    let body = text.split_once("\r\n\r\n").map_or(0, |(_, b)| b.len());
    Ok(body)
}

/// Sequential forwarded calls through `steward mcp` at `n` fakes, with
/// `vars` in the controller's environment; the durations in ms.
fn call_latency(ctx: &Ctx, n: usize, vars: &[(&str, &str)], calls: usize) -> Result<Vec<f64>> {
    let r = start_steward_full(ctx, n, false, &FakeMcpConfig::default(), &[], vars)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let client = stdio_client(ctx, &r.sb.env, quiet()).await?;
        let lat = latency(client.peer(), TOOL, calls / 10, calls).await?;
        client.cancel().await?;
        Ok(lat)
    })
}

pub(super) fn observe(ctx: &Ctx) -> Result<(Value, serde_json::Map<String, Value>)> {
    let quick = ctx.opts.quick;
    let n = if quick { 50 } else { 500 };
    let window = Duration::from_secs(if quick { 5 } else { 30 });
    let scrapes = 20;
    let mut out = serde_json::Map::new();
    let mut targets = serde_json::Map::new();

    progress(format!(
        "observe: idle CPU at {n} servers without --metrics-listen"
    ));
    let off = start_steward(ctx, n, false)?;
    let idle_off = idle_pct(ctx, &off, window)?;
    drop(off);

    progress(format!(
        "observe: idle CPU at {n} servers with --metrics-listen"
    ));
    let addr = format!("127.0.0.1:{}", free_port()?);
    let extra = ["--metrics-listen".to_owned(), addr.clone()];
    let on = start_steward_with(ctx, n, false, &FakeMcpConfig::default(), &extra)?;
    let idle_on = idle_pct(ctx, &on, window)?;
    let added = idle_on - idle_off;
    out.insert(
        "idleCpuPct".into(),
        json!({"n": n, "windowS": window.as_secs(), "withoutMetrics": r3(idle_off),
               "withMetrics": r3(idle_on), "added": r3(added)}),
    );
    targets.insert(
        "metricsIdleAddedCpuPct".into(),
        target(json!(r3(added)), "<= 0.05", Some(added <= 0.05)),
    );

    progress(format!("observe: {scrapes} scrapes at {n} servers"));
    scrape(&addr)?;
    let a = cpu_sample(on.stw.pid)?;
    let mut bytes = 0;
    for _ in 0..scrapes {
        bytes = scrape(&addr)?;
    }
    let b = cpu_sample(on.stw.pid)?;
    let per_scrape = cpu_delta(&a, &b).sched_ms / scrapes as f64;
    drop(on);
    out.insert(
        "scrape".into(),
        json!({"n": n, "scrapes": scrapes, "cpuMsPerScrape": r3(per_scrape), "bytes": bytes}),
    );
    targets.insert(
        "metricsScrapeCpuMs".into(),
        target(json!(r3(per_scrape)), "<= 5", Some(per_scrape <= 5.0)),
    );

    progress("observe: the metrics' work on a forwarded call, in-process");
    let iterations = if quick { 100_000 } else { 1_000_000 };
    let t = Instant::now();
    for i in 0..iterations {
        let mut call = ToolCall::begin(Via::Direct);
        call.to("s000", "echo");
        call.ended(if i % 2 == 0 {
            CallResult::Ok
        } else {
            CallResult::ToolError
        });
    }
    let per_call_us = t.elapsed().as_secs_f64() * 1e6 / iterations as f64;
    out.insert(
        "callRecording".into(),
        json!({"iterations": iterations, "usPerCall": r3(per_call_us)}),
    );
    targets.insert(
        "metricsAddedPerCallMs".into(),
        target(
            json!(r3(per_call_us / 1000.0)),
            "<= 0.02",
            Some(per_call_us <= 20.0),
        ),
    );

    let calls = if quick { 300 } else { 3000 };
    let fleet = 10;
    progress(format!(
        "observe: {calls} forwarded calls, traces off then exported"
    ));
    let plain = call_latency(ctx, fleet, &[], calls)?;
    let receiver = sink_receiver()?;
    let traced = call_latency(
        ctx,
        fleet,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.as_str())],
        calls,
    )?;
    let added = summarize(&traced).p50 - summarize(&plain).p50;
    out.insert(
        "tracedCall".into(),
        json!({"n": fleet, "withoutEndpoint": lat_json(&plain), "exporting": lat_json(&traced),
               "addedP50Ms": r3(added)}),
    );
    targets.insert(
        "tracingAddedP50Ms".into(),
        target(json!(r3(added)), "<= 0.05", Some(added <= 0.05)),
    );
    Ok((Value::Object(out), targets))
}

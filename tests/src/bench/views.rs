//! Scenario `views` of `steward-bench`: the latency a `tools/call` gains
//! through the one-server view (`steward mcp --server NAME`,
//! `/mcp/NAME`) against the aggregate endpoint (`steward mcp`, `/mcp`) and
//! the server called directly.
//!
//! One controller with one fake (`s000`) and `--mcp-listen`; rmcp clients
//! (this process) make sequential calls of the fake's `echo`, each kind of
//! client in turn on the same controller: a small call (`{"x": 1}`, about
//! 60 bytes of result) and a large one (`{"issues": 2773}`: a text result
//! of about 1 MiB, its size reported). "direct" is a fake of the same
//! configuration the client spawns itself. The added latency of a path is
//! its p50 (p95) less direct's.

use rmcp::model::CallToolRequestParams;
use rmcp::{Peer, RoleClient};

use super::gateway::{direct_client, http_client, quiet, stdio_client_with};
use super::*;

/// Issue summaries (about 380 bytes each) in the large result: ~1 MiB.
const LARGE_ISSUES: u64 = 2773;

/// One call of `name` with `arguments`; the bytes of its text.
async fn call(peer: &Peer<RoleClient>, name: &str, arguments: &Value) -> Result<usize> {
    let args = arguments.as_object().cloned().unwrap_or_default();
    let r = peer
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(args))
        .await?;
    if r.is_error == Some(true) {
        bail!("{name} answered an error: {:?}", r.content);
    }
    Ok(r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.len()))
        .sum())
}

/// `warm` calls, then `n` timed sequential calls: their durations in ms
/// and the bytes of the last result.
async fn timed(
    peer: &Peer<RoleClient>,
    name: &str,
    arguments: &Value,
    warm: usize,
    n: usize,
) -> Result<(Vec<f64>, usize)> {
    for _ in 0..warm {
        call(peer, name, arguments).await?;
    }
    let (mut out, mut bytes) = (Vec::with_capacity(n), 0);
    for _ in 0..n {
        let t = Instant::now();
        bytes = call(peer, name, arguments).await?;
        out.push(ms(t.elapsed()));
    }
    Ok((out, bytes))
}

pub(super) fn views(ctx: &Ctx) -> Result<(Value, serde_json::Map<String, Value>)> {
    let quick = ctx.opts.quick;
    let (warm, small_n, large_n) = if quick {
        (20, 100, 10)
    } else {
        (200, 2000, 100)
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let extra = ["--mcp-listen".to_owned(), "127.0.0.1:0".to_owned()];
    let r = start_steward_with(ctx, 1, true, &FakeMcpConfig::default(), &extra)?;
    let url = r
        .stw
        .status()?
        .controller
        .gateway
        .and_then(|g| g.listen)
        .ok_or_else(|| anyhow!("the controller reports no HTTP address"))?;
    let env = &r.sb.env;
    let server = r.fleet.names[0].clone();
    let prefixed = format!("{server}__echo");
    let small = json!({"x": 1});
    let large = json!({"issues": LARGE_ISSUES});
    progress(format!(
        "views: {small_n} small and {large_n} ~1 MiB calls per path"
    ));
    let paths = [
        "direct",
        "aggregateStdio",
        "oneServerStdio",
        "aggregateHttp",
        "oneServerHttp",
    ];
    let mut measured = serde_json::Map::new();
    let mut p = std::collections::BTreeMap::new();
    for path in paths {
        let client = rt.block_on(async {
            match path {
                "direct" => direct_client(&r.fleet).await,
                "aggregateStdio" => stdio_client_with(ctx, env, quiet(), &[]).await,
                "oneServerStdio" => {
                    stdio_client_with(ctx, env, quiet(), &["--server", &server]).await
                }
                "aggregateHttp" => http_client(&url).await,
                _ => http_client(&format!("{url}/{server}")).await,
            }
        })?;
        let tool = if path.starts_with("aggregate") {
            prefixed.as_str()
        } else {
            "echo"
        };
        let (small_ms, large_ms, large_bytes) = rt.block_on(async {
            let (s, _) = timed(client.peer(), tool, &small, warm, small_n).await?;
            let (l, bytes) = timed(client.peer(), tool, &large, 2, large_n).await?;
            client.cancel().await?;
            Ok::<_, anyhow::Error>((s, l, bytes))
        })?;
        let (s, l) = (summarize(&small_ms), summarize(&large_ms));
        p.insert(path, (s.p50, s.p95, l.p50, l.p95));
        measured.insert(
            path.to_owned(),
            json!({
                "small": {"n": s.n, "p50Ms": r3(s.p50), "p95Ms": r3(s.p95)},
                "large": {"n": l.n, "p50Ms": r3(l.p50), "p95Ms": r3(l.p95),
                          "resultBytes": large_bytes},
            }),
        );
    }
    let direct = p["direct"];
    let mut added = serde_json::Map::new();
    for path in &paths[1..] {
        let v = p[path];
        added.insert(
            (*path).to_owned(),
            json!({
                "smallP50Ms": r3(v.0 - direct.0), "smallP95Ms": r3(v.1 - direct.1),
                "largeP50Ms": r3(v.2 - direct.2), "largeP95Ms": r3(v.3 - direct.3),
            }),
        );
    }
    let mut targets = serde_json::Map::new();
    let view_vs_union = p["oneServerStdio"].0 - p["aggregateStdio"].0;
    targets.insert(
        "viewsOneServerVsAggregateStdioP50Ms".into(),
        target(
            json!(r3(view_vs_union)),
            "<= 0.1 (the view costs no more than the union)",
            Some(view_vs_union <= 0.1),
        ),
    );
    let out = json!({
        "server": server,
        "paths": measured,
        "addedOverDirect": added,
        "how": "sequential tools/call of the fake's echo on one connection per path, \
                each path in turn on one controller; direct: a fake of the same \
                configuration spawned by the client",
    });
    Ok((out, targets))
}

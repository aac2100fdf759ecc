//! Developer tool: CPU cost of applying one edited server entry to the
//! desired state (`DesiredStore::apply_file`) as the settings file grows.
//! The controller benchmark (`steward-bench --only cost`) measures the whole
//! controller; this isolates the load → snapshot → diff step.
//!
//! cargo run --release -p steward --example apply_cost [N...]

use std::collections::BTreeMap;
use std::time::Instant;

use steward::desired::snapshot::DesiredStore;
use steward::support::paths::Paths;
use steward_schema::desired::CliOptions;

fn content(n: usize, stamps: &BTreeMap<usize, usize>) -> String {
    let entries: Vec<String> = (0..n)
        .map(|i| {
            let mut env = BTreeMap::new();
            env.insert(
                "FAKE_MCP_CONFIG".to_owned(),
                format!(
                    "{{\"name\":\"s{i:03}\",\"record\":\"/tmp/records/s{i:03}.jsonl\",\"tools\":[{{\"name\":\"echo\",\"description\":\"Echo the input back\"}}]}}"
                ),
            );
            if let Some(stamp) = stamps.get(&i) {
                env.insert("EDIT".to_owned(), format!("c{stamp}"));
            }
            format!(
                "\"s{i:03}\":{{\"command\":\"/usr/local/bin/fake-mcp-server\",\"env\":{}}}",
                serde_json::to_string(&env).unwrap()
            )
        })
        .collect();
    format!("{{\"mcpServers\":{{{}}}}}", entries.join(","))
}

fn main() {
    let ns: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let ns = if ns.is_empty() { vec![10, 50, 500] } else { ns };
    for n in ns {
        let dir = tempfile::tempdir().expect("temp dir");
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join(".qwen")).unwrap();
        let mut env = BTreeMap::new();
        env.insert(
            "QWEN_HOME".to_owned(),
            dir.path().join("home").to_string_lossy().into_owned(),
        );
        let paths = Paths::resolve(&ws, &env).unwrap();
        // User settings: no approval needed, as in steward-bench.
        let settings = paths.user_settings.clone();
        std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
        std::fs::write(&settings, content(n, &BTreeMap::new())).unwrap();
        let cli = CliOptions {
            lsp_enabled: true,
            ..CliOptions::default()
        };
        let store = DesiredStore::cold_start(paths, env, cli, Vec::new());
        let edits = 200;
        let mut total = std::time::Duration::ZERO;
        let mut stamps = BTreeMap::new();
        for k in 0..edits {
            stamps.insert((k * 7 + 3) % n, k);
            std::fs::write(&settings, content(n, &stamps)).unwrap();
            let t = Instant::now();
            let applied = store.apply_file(&settings);
            total += t.elapsed();
            assert_eq!(applied.changed.len(), 1, "one server changed");
        }
        let size = std::fs::metadata(&settings).unwrap().len();
        println!(
            "n={n:4} file={:6} KB  apply_file mean {:8.3} ms",
            size / 1024,
            total.as_secs_f64() * 1000.0 / edits as f64
        );
    }
}

//! Ranking quality on a labeled set: `catalog.json` holds real tool
//! definitions (`@modelcontextprotocol/server-everything@2026.8.31` as a
//! client with sampling, elicitation and roots sees it, and
//! `mcp-server-time==2026.10.19`) beside imitations of popular servers;
//! `queries.json` holds requests phrased as an agent would, each with the
//! tool (or the equally right tools) it should find. The queries were
//! written before the scorer was tuned and are not changed to fit it.

use rmcp::model::Tool;
use serde::Deserialize;

use super::{SearchEntry, ToolIndex};
use crate::gateway::names;

#[derive(Deserialize)]
struct CatalogEntry {
    server: String,
    tool: Tool,
}

#[derive(Deserialize)]
struct Labeled {
    query: String,
    expected: Expected,
}

/// The right answer, or several equally right ones.
#[derive(Deserialize)]
#[serde(untagged)]
enum Expected {
    One(String),
    Any(Vec<String>),
}

impl Expected {
    fn contains(&self, name: &str) -> bool {
        match self {
            Expected::One(one) => one == name,
            Expected::Any(any) => any.iter().any(|n| n == name),
        }
    }

    fn names(&self) -> Vec<&str> {
        match self {
            Expected::One(one) => vec![one],
            Expected::Any(any) => any.iter().map(String::as_str).collect(),
        }
    }
}

struct Catalog {
    entries: Vec<CatalogEntry>,
    exposed: Vec<String>,
}

fn load_catalog() -> Catalog {
    let entries: Vec<CatalogEntry> =
        serde_json::from_str(include_str!("catalog.json")).expect("catalog.json parses");
    let exposed = names::assign(
        entries
            .iter()
            .map(|e| (e.server.as_str(), e.tool.name.as_ref())),
        names::MAX_LEN,
    );
    Catalog { entries, exposed }
}

fn load_queries() -> Vec<Labeled> {
    serde_json::from_str(include_str!("queries.json")).expect("queries.json parses")
}

impl Catalog {
    fn index(&self) -> ToolIndex {
        ToolIndex::build(
            self.entries
                .iter()
                .zip(&self.exposed)
                .map(|(e, exposed)| SearchEntry {
                    exposed,
                    server: &e.server,
                    tool: &e.tool,
                }),
        )
    }
}

#[test]
fn the_labeled_set_is_large_varied_and_consistent() {
    let catalog = load_catalog();
    let mut servers: Vec<&str> = catalog.entries.iter().map(|e| e.server.as_str()).collect();
    servers.sort_unstable();
    servers.dedup();
    assert!(
        catalog.entries.len() >= 120,
        "{} tools",
        catalog.entries.len()
    );
    assert!(servers.len() >= 12, "{} servers", servers.len());
    let queries = load_queries();
    assert!(queries.len() >= 100, "{} queries", queries.len());
    for labeled in &queries {
        for name in labeled.expected.names() {
            assert!(
                catalog.exposed.iter().any(|e| e == name),
                "{:?} expects {name}, which is not in the catalog",
                labeled.query
            );
        }
    }
    for server in ["everything", "time"] {
        assert!(servers.contains(&server), "the real {server} server");
    }
}

#[test]
fn top_1_and_top_3_accuracy_meet_the_targets() {
    let catalog = load_catalog();
    let index = catalog.index();
    let queries = load_queries();
    let (mut top1, mut top3) = (0, 0);
    for labeled in &queries {
        let hits = index.search(&labeled.query, 3, None);
        let found: Vec<&str> = hits
            .iter()
            .map(|h| catalog.exposed[h.index].as_str())
            .collect();
        match found
            .iter()
            .position(|name| labeled.expected.contains(name))
        {
            Some(0) => {
                top1 += 1;
                top3 += 1;
            }
            Some(_) => {
                top3 += 1;
                eprintln!("top-3 only: {:?} → {found:?}", labeled.query);
            }
            None => eprintln!(
                "missed:     {:?} → {found:?}, expected {:?}",
                labeled.query,
                labeled.expected.names()
            ),
        }
    }
    let n = queries.len();
    let (at1, at3) = (top1 as f64 / n as f64, top3 as f64 / n as f64);
    eprintln!(
        "tool search over {} tools, {n} queries: top-1 {top1}/{n} = {at1:.3}, top-3 {top3}/{n} = {at3:.3}",
        catalog.entries.len()
    );
    assert!(at1 >= 0.85, "top-1 accuracy {at1:.3} < 0.85");
    assert!(at3 >= 0.95, "top-3 accuracy {at3:.3} < 0.95");
}

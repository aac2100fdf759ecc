//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! pinned in `.ci/run`, run on Node 22) with Steward as the client: every
//! `auth/*` client scenario the suite requires for 2025-11-25 and for
//! 2026-07-28 (read from the suite itself: `list --requirements`), and
//! `initialize`, `tools_call`, `sse-retry`, `json-schema-2020-12-preservation`.
//!
//! The client command is `steward-conformance-client` (tests/src/bin): a
//! workspace whose only server is the scenario's URL, `steward run`,
//! `steward auth login` with a browser that follows the redirects, and an
//! agent that lists and calls the tools through `steward mcp`. A scenario
//! passes when the suite records no FAILURE check and says it passed.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use steward_tests::harness::{base_env, bin};

use crate::common::conformance_suite;

/// What the suite requires of a client for `version`, as it lists it.
fn required_client_scenarios(version: &str) -> Vec<String> {
    let (node, cli) = conformance_suite();
    let out = Command::new(node)
        .arg(cli)
        .args(["list", "--requirements", version])
        .output()
        .expect("run the conformance suite's list");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let client = text
        .split("Client scenarios")
        .nth(1)
        .expect("the list has client scenarios");
    let client = client.split("\n\n").next().unwrap_or_default();
    client
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- "))
        .map(str::to_owned)
        .collect()
}

/// Runs `scenario` at `version`; returns the checks, after asserting that
/// none failed and the suite passed it.
fn run(version: &str, scenario: &str) -> Vec<Value> {
    let (node, cli) = conformance_suite();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let story = dir.path().join("client.log");
    let out = Command::new(node)
        .arg(cli)
        .args(["client", "--command"])
        .arg(bin("steward-conformance-client"))
        .args(["--scenario", scenario, "--spec-version", version])
        .args(["--timeout", "90000", "--output-dir"])
        .arg(&results)
        .current_dir(dir.path())
        .env_clear()
        .envs(base_env())
        .env("STEWARD_BIN", bin("steward"))
        .env("CONFORMANCE_CLIENT_LOG", &story)
        .output()
        .expect("run the conformance suite");
    let checks = checks_in(&results);
    let story = std::fs::read_to_string(&story).unwrap_or_default();
    let failed: Vec<&Value> = checks.iter().filter(|c| c["status"] == "FAILURE").collect();
    // The suite reports on stderr.
    let output = String::from_utf8_lossy(&out.stderr);
    assert!(
        failed.is_empty() && out.status.success() && !checks.is_empty(),
        "{scenario} at {version}: {} failed checks {failed:#?}\nsuite: {}\nclient:\n{story}",
        failed.len(),
        output.lines().rev().take(6).collect::<Vec<_>>().join(" | "),
    );
    checks
}

/// Every check of the run under `results` (its `checks.json`, in a
/// directory named after the scenario and the time).
fn checks_in(results: &Path) -> Vec<Value> {
    let mut checks = Vec::new();
    for entry in std::fs::read_dir(results).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            checks.extend(checks_in(&path));
        } else if path.file_name().is_some_and(|n| n == "checks.json") {
            let text = std::fs::read_to_string(&path).unwrap();
            checks.extend(
                serde_json::from_str::<Vec<Value>>(&text)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display())),
            );
        }
    }
    checks
}

fn run_all(version: &str, scenarios: &[String]) {
    let mut failures = Vec::new();
    for scenario in scenarios {
        if let Err(panic) = std::panic::catch_unwind(|| run(version, scenario)) {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            failures.push(text);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn auth_scenarios(version: &str, family: impl Fn(&str) -> bool) -> Vec<String> {
    let all: Vec<String> = required_client_scenarios(version)
        .into_iter()
        .filter(|s| s.starts_with("auth/"))
        .collect();
    assert!(all.len() >= 14, "{version}: {all:?}");
    all.into_iter().filter(|s| family(s)).collect()
}

fn discovery_and_scopes(s: &str) -> bool {
    s.starts_with("auth/metadata-")
        || s.starts_with("auth/scope-")
        || s == "auth/basic-cimd"
        || s == "auth/resource-mismatch"
}

#[test]
fn auth_2025_11_25_discovery_and_scopes() {
    run_all(
        "2025-11-25",
        &auth_scenarios("2025-11-25", discovery_and_scopes),
    );
}

#[test]
fn auth_2025_11_25_clients_and_token_endpoint() {
    run_all(
        "2025-11-25",
        &auth_scenarios("2025-11-25", |s| !discovery_and_scopes(s)),
    );
}

#[test]
fn auth_2026_07_28_discovery_and_scopes() {
    run_all(
        "2026-07-28",
        &auth_scenarios("2026-07-28", discovery_and_scopes),
    );
}

#[test]
fn auth_2026_07_28_clients_issuers_and_migration() {
    run_all(
        "2026-07-28",
        &auth_scenarios("2026-07-28", |s| !discovery_and_scopes(s)),
    );
}

#[test]
fn initialize_tools_call_sse_retry_and_schema_preservation() {
    let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    run_all(
        "2025-11-25",
        &names(&[
            "initialize",
            "tools_call",
            "sse-retry",
            "json-schema-2020-12-preservation",
        ]),
    );
    run_all(
        "2026-07-28",
        &names(&["tools_call", "json-schema-2020-12-preservation"]),
    );
}

/// The checks say what Steward did where a sign-in must fail: it never
/// sent the code to the token endpoint, nor used poisoned metadata.
#[test]
fn a_wrong_issuer_or_resource_stops_the_sign_in_before_any_token() {
    for (scenario, id) in [
        (
            "auth/iss-wrong-issuer",
            "sep-2468-client-compare-iss-supported",
        ),
        ("auth/resource-mismatch", "resource-mismatch-rejected"),
        (
            "auth/metadata-issuer-mismatch",
            "sep-2468-client-validate-metadata-issuer",
        ),
    ] {
        let checks = run("2026-07-28", scenario);
        let check = checks
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("{scenario}: no check {id}"));
        assert_eq!(check["status"], "SUCCESS", "{scenario}: {check:#}");
        assert!(
            !checks.iter().any(|c| c["id"] == "token-request"),
            "{scenario}: a token request was made"
        );
    }
}

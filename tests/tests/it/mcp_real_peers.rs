//! Real peers (third-party MCP servers, installed by `.ci/run` at pinned
//! versions): `@modelcontextprotocol/server-everything` (npm, Node) and
//! `mcp-server-time` (PyPI, Python), run by the real `steward run`.
//!
//! This tier is never skipped: a missing peer fails with a message naming it
//! and saying to run `.ci/run`.

use std::time::Duration;

use crate::common::peer;
use serde_json::{Value, json};
use steward_tests::harness::{
    Controller, Env, alive, mcp, pid_of, process_tree, ready, wait_all_gone,
};

/// Node starts slowly on a loaded 2-core machine; Python imports too.
const PEER_DEADLINE: Duration = Duration::from_secs(60);

fn everything() -> Value {
    let bin = peer(
        "@modelcontextprotocol/server-everything",
        "node_modules/.bin/mcp-server-everything",
    );
    // The first argument picks the transport (default stdio; say it).
    json!({"command": bin.to_string_lossy(), "args": ["stdio"]})
}

fn time() -> Value {
    let bin = peer("mcp-server-time", "venv/bin/mcp-server-time");
    json!({"command": bin.to_string_lossy(), "args": []})
}

fn tools_of(c: &Controller, name: &str) -> Vec<String> {
    mcp(&c.status(), name)
        .and_then(|m| m.status.tools.clone())
        .unwrap_or_default()
}

fn start_both(env: &Env) -> (Controller, u32, u32) {
    env.user_mcp_servers(&[("everything", everything()), ("time", time())]);
    let c = env.start(&[]);
    let s = c.wait_for_within("everything and time Ready", PEER_DEADLINE, |s| {
        ready(s, "everything") && ready(s, "time")
    });
    (
        c,
        pid_of(&s, "everything").unwrap(),
        pid_of(&s, "time").unwrap(),
    )
}

#[test]
fn real_peers_reach_ready_with_their_real_tool_lists() {
    let env = Env::new();
    let (c, pe, pt) = start_both(&env);
    assert!(alive(pe) && alive(pt));
    let tools = tools_of(&c, "everything");
    for t in ["echo", "get-sum", "get-env"] {
        assert!(
            tools.iter().any(|x| x == t),
            "everything lacks {t}: {tools:?}"
        );
    }
    let tools = tools_of(&c, "time");
    for t in ["get_current_time", "convert_time"] {
        assert!(tools.iter().any(|x| x == t), "time lacks {t}: {tools:?}");
    }
    let s = c.status();
    for name in ["everything", "time"] {
        let m = mcp(&s, name).unwrap();
        assert_eq!(m.status.restarts, 0, "{name}: {:?}", m.status);
        assert_eq!(
            m.status.observed_hash.as_deref(),
            Some(m.spec.config_hash.as_str())
        );
    }
}

#[test]
fn editing_one_real_peer_restarts_only_that_one() {
    let env = Env::new();
    let (c, pe, pt) = start_both(&env);
    let old_time_tree = process_tree(pt);

    // An args edit of time: only time restarts.
    let mut time2 = time();
    time2["args"] = json!(["--local-timezone", "UTC"]);
    env.user_mcp_servers(&[("everything", everything()), ("time", time2.clone())]);
    let s = c.wait_for_within("time restarted", PEER_DEADLINE, |s| {
        ready(s, "time") && pid_of(s, "time").is_some_and(|p| p != pt)
    });
    assert_eq!(
        pid_of(&s, "everything"),
        Some(pe),
        "everything must keep its pid"
    );
    assert_eq!(mcp(&s, "time").unwrap().metadata.generation, 2);
    assert!(
        mcp(&s, "time")
            .unwrap()
            .status
            .tools
            .as_ref()
            .is_some_and(|t| t.iter().any(|x| x == "get_current_time"))
    );
    wait_all_gone(
        "the old time server and its descendants exit",
        &old_time_tree,
    );
    let pt2 = pid_of(&s, "time").unwrap();

    // An env edit of everything: only everything restarts.
    let old_everything_tree = process_tree(pe);
    let mut everything2 = everything();
    everything2["env"] = json!({"STEWARD_TEST_EDIT": "1"});
    env.user_mcp_servers(&[("everything", everything2), ("time", time2)]);
    let s = c.wait_for_within("everything restarted", PEER_DEADLINE, |s| {
        ready(s, "everything") && pid_of(s, "everything").is_some_and(|p| p != pe)
    });
    assert_eq!(pid_of(&s, "time"), Some(pt2), "time must keep its pid");
    assert!(
        mcp(&s, "everything")
            .unwrap()
            .status
            .tools
            .as_ref()
            .is_some_and(|t| t.iter().any(|x| x == "echo"))
    );
    wait_all_gone(
        "the old everything server and its descendants exit",
        &old_everything_tree,
    );
}

#[test]
fn removing_a_real_peer_leaves_no_process_behind() {
    let env = Env::new();
    let (c, pe, pt) = start_both(&env);
    // Collected before removal: once the leader dies, its children are
    // reparented and can no longer be found from it.
    let everything_tree = process_tree(pe);
    let time_tree = process_tree(pt);

    env.user_mcp_servers(&[("time", time())]);
    let s = c.wait_for("everything gone from status", |s| {
        mcp(s, "everything").is_none()
    });
    assert!(
        s.removed.iter().any(|r| r.name == "everything"),
        "{:?}",
        s.removed
    );
    wait_all_gone("everything and every descendant exit", &everything_tree);
    assert_eq!(
        pid_of(&s, "time"),
        Some(pt),
        "time must keep running untouched"
    );

    env.user_mcp_servers(&[]);
    c.wait_for("time gone from status", |s| mcp(s, "time").is_none());
    wait_all_gone("time and every descendant exit", &time_tree);
}

#[test]
fn real_peers_answer_under_the_none_profile() {
    let env = Env::new();
    // No network, no workspace, no home: each reads only the system and its
    // own runtime (node and its packages; the venv and its Python).
    env.write_home(
        "settings.json",
        &json!({
            "mcpServers": {"everything": everything(), "time": time()},
            "steward": {"sandbox": {"default": "none"}},
        })
        .to_string(),
    );
    let c = env.start(&[]);
    let s = c.wait_for_within("everything and time Ready", PEER_DEADLINE, |s| {
        ready(s, "everything") && ready(s, "time")
    });
    for name in ["everything", "time"] {
        let sandbox = mcp(&s, name).unwrap().status.sandbox.clone().unwrap();
        assert_eq!(
            (sandbox.profile.as_str(), sandbox.network),
            ("none", steward_schema::resource::SandboxNetwork::None),
            "{name}"
        );
        assert_eq!(
            sandbox.enforcement,
            steward_schema::resource::Enforcement::Full,
            "{name}: {:?}",
            sandbox.missing
        );
    }
    // They answer calls.
    let rt = crate::gateway::runtime();
    rt.block_on(async {
        let client = crate::gateway::attach(&env, crate::gateway::Agent::default()).await;
        let sum =
            crate::gateway::call(&client, "everything__get-sum", json!({"a": 2, "b": 3})).await;
        assert!(
            crate::gateway::text(&sum).contains('5'),
            "{}",
            crate::gateway::text(&sum)
        );
        let now = crate::gateway::call(
            &client,
            "time__get_current_time",
            json!({"timezone": "UTC"}),
        )
        .await;
        assert_ne!(now.is_error, Some(true), "{}", crate::gateway::text(&now));
        assert!(
            crate::gateway::text(&now).contains("UTC"),
            "{}",
            crate::gateway::text(&now)
        );
    });
}

#[test]
fn package_runners_fetch_into_each_servers_private_cache_under_standard() {
    // server-everything through the real `npx`, mcp-server-time through the
    // real `uvx` (pinned versions): under `standard` each fetches into its
    // own private home — the user's ~/.npm and ~/.cache/uv stay untouched —
    // and answers; a restart reuses what it fetched.
    let env = Env::new();
    let home = env.root.path().join("user");
    std::fs::create_dir_all(&home).unwrap();
    env.set_var("HOME", &home.to_string_lossy());
    let npx = which("npx");
    let uvx = peer("uv", "venv/bin/uvx");
    let version = |package: &str| {
        let pinned = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/run"),
        )
        .unwrap();
        pinned
            .lines()
            .find_map(|l| {
                let l = l.trim().trim_matches('"');
                l.strip_prefix(package).map(str::to_owned)
            })
            .unwrap_or_else(|| panic!("{package} is not pinned in .ci/run"))
    };
    let everything = format!(
        "@modelcontextprotocol/server-everything{}",
        version("@modelcontextprotocol/server-everything")
    );
    let time = format!("mcp-server-time{}", version("mcp-server-time"));
    env.user_mcp_servers(&[
        (
            "everything",
            json!({"command": npx.to_string_lossy(), "args": ["--yes", everything, "stdio"]}),
        ),
        (
            "time",
            // The machine's certificate store (uv has its own otherwise; a
            // TLS-inspecting proxy's CA is only in the machine's).
            json!({"command": uvx.to_string_lossy(), "args": ["--from", time, "mcp-server-time"],
                   "env": {"UV_SYSTEM_CERTS": "true"}}),
        ),
    ]);
    let c = env.start(&[]);
    let s = c.wait_for_within(
        "everything (npx) and time (uvx) Ready",
        Duration::from_secs(240),
        |s| ready(s, "everything") && ready(s, "time"),
    );
    for name in ["everything", "time"] {
        let sandbox = mcp(&s, name).unwrap().status.sandbox.clone().unwrap();
        assert_eq!(sandbox.profile, "standard", "{name}");
        let private = std::path::PathBuf::from(sandbox.home.unwrap());
        let cache = private.join(if name == "time" {
            "cache/uv"
        } else {
            "cache/npm"
        });
        let filled = std::fs::read_dir(&cache).map(|d| d.count()).unwrap_or(0);
        assert!(
            filled > 0,
            "{name} fetched nothing into {}",
            cache.display()
        );
    }
    assert!(!home.join(".npm").exists(), "npx wrote the user's ~/.npm");
    assert!(
        !home.join(".cache/uv").exists(),
        "uvx wrote the user's ~/.cache/uv"
    );
    let rt = crate::gateway::runtime();
    let answer = |c: &Controller| {
        let _ = c;
        rt.block_on(async {
            let client = crate::gateway::attach(&env, crate::gateway::Agent::default()).await;
            let sum =
                crate::gateway::call(&client, "everything__get-sum", json!({"a": 2, "b": 3})).await;
            assert!(
                crate::gateway::text(&sum).contains('5'),
                "{}",
                crate::gateway::text(&sum)
            );
            let now = crate::gateway::call(
                &client,
                "time__get_current_time",
                json!({"timezone": "UTC"}),
            )
            .await;
            assert!(
                crate::gateway::text(&now).contains("UTC"),
                "{}",
                crate::gateway::text(&now)
            );
        })
    };
    answer(&c);
    // A restart starts from the warm private cache.
    let pid = pid_of(&s, "time").unwrap();
    assert_eq!(env.run(&["restart", "time"]).code, 0);
    c.wait_for_within("time Ready again", PEER_DEADLINE, |s| {
        ready(s, "time") && pid_of(s, "time").is_some_and(|p| p != pid)
    });
    answer(&c);
}

/// `name` on this process's PATH (the peers' bin directories first, as
/// `.ci/run` sets it); fails the test when it is missing.
fn which(name: &str) -> std::path::PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is not on PATH"))
}

//! Envtest: each server's private home (product.md §9, "Nothing planted
//! for later"), what is reported of code-running files a server could
//! create, and the mends that make a server's confinement visible before
//! anything runs: `off` shown as such, an unknown profile an invalid entry.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde_json::{Value, json};
use steward_schema::resource::{Enforcement, Phase, Reason};
use steward_tests::harness::{Env, fake_tools as tools, mcp, ready};

use crate::gateway::{Agent, attach};
use crate::sandbox::{Hostile, Victim, attempt, attempt_on, p, unrecorded};

/// (content, inode) of a file.
fn fingerprint(path: &Path) -> (String, u64) {
    (
        std::fs::read_to_string(path).unwrap(),
        std::fs::metadata(path).unwrap().ino(),
    )
}

#[test]
fn a_server_writes_its_own_caches_and_nobody_elses() {
    let v = Victim::new();
    // The user's own caches, which no server may touch.
    let user_npm = v.home.join(".npm/_cacache/index-v5/00/entry");
    let user_uv = v.home.join(".cache/uv/archive-v0/x/site.pth");
    for f in [&user_npm, &user_uv] {
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, "the user's").unwrap();
    }
    let a = unrecorded(v.env.fake_mcp("a", tools(&["t1"])));
    let b = unrecorded(v.env.fake_mcp("b", tools(&["t1"])));
    v.env.write_home(
        "settings.json",
        &json!({"mcpServers": {"a": a, "b": b}}).to_string(),
    );
    let c = v.env.start(&[]);
    let s = c.wait_for("a and b Ready", |s| ready(s, "a") && ready(s, "b"));
    let client = Hostile {
        client: v.rt.block_on(attach(&v.env, Agent::default())),
        rt: &v.rt,
    };
    let var = |server: &str, name: &str| {
        attempt_on(&client, &format!("{server}__t1"), json!({"env": name})).unwrap()
    };
    let (a_npm, a_uv) = (var("a", "npm_config_cache"), var("a", "UV_CACHE_DIR"));
    let (b_npm, b_uv) = (var("b", "npm_config_cache"), var("b", "UV_CACHE_DIR"));
    let a_home = mcp(&s, "a")
        .unwrap()
        .status
        .sandbox
        .clone()
        .unwrap()
        .home
        .unwrap();
    assert!(
        a_npm.starts_with(&a_home) && a_uv.starts_with(&a_home),
        "{a_npm} {a_home}"
    );
    assert_ne!(a_npm, b_npm);
    for (name, path) in [
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_STATE_HOME", "state"),
    ] {
        assert_eq!(var("a", name), format!("{a_home}/{path}"));
    }
    // b fills its caches first.
    let b_pkg = format!("{b_npm}/_npx/0123abcd/node_modules/x/index.js");
    let b_pth = format!("{b_uv}/archive-v0/y/site.pth");
    for f in [&b_pkg, &b_pth] {
        attempt_on(
            &client,
            "b__t1",
            json!({"mkdir": p(Path::new(f).parent().unwrap())}),
        )
        .unwrap();
        attempt_on(&client, "b__t1", json!({"write": f})).unwrap();
    }
    let before: Vec<_> = [Path::new(&b_pkg), Path::new(&b_pth), &user_npm, &user_uv]
        .iter()
        .map(|f| fingerprint(f))
        .collect();
    // a edits everything it can reach under its own caches: fine.
    let own = format!("{a_npm}/_npx/0123abcd/node_modules/x/index.js");
    attempt_on(
        &client,
        "a__t1",
        json!({"mkdir": p(Path::new(&own).parent().unwrap())}),
    )
    .unwrap();
    attempt_on(&client, "a__t1", json!({"write": own})).unwrap();
    attempt_on(
        &client,
        "a__t1",
        json!({"write": format!("{a_uv}/evil.pth")}),
    )
    .unwrap();
    // ...and nothing of b's or the user's.
    for target in [
        b_pkg.clone(),
        b_pth.clone(),
        format!("{b_npm}/_npx/new/x.js"),
        p(&user_npm),
        p(&user_uv),
        p(&v.home.join(".npm/_npx/0123abcd/node_modules/x/index.js")),
    ] {
        let planted = attempt_on(&client, "a__t1", json!({"write": target.clone()}));
        assert!(planted.is_err(), "a wrote {target}");
    }
    assert!(
        attempt_on(&client, "a__t1", json!({"read": b_pkg.clone()})).is_err(),
        "a read b's cache"
    );
    let after: Vec<_> = [Path::new(&b_pkg), Path::new(&b_pth), &user_npm, &user_uv]
        .iter()
        .map(|f| fingerprint(f))
        .collect();
    assert_eq!(before, after, "b's and the user's caches are as they were");
    // The home is reused across a restart (downloads kept).
    assert_eq!(v.env.run(&["restart", "a"]).code, 0);
    c.wait_for("a Ready again", |s| ready(s, "a"));
    let client = Hostile {
        client: v.rt.block_on(attach(&v.env, Agent::default())),
        rt: &v.rt,
    };
    let kept = attempt_on(
        &client,
        "a__t1",
        json!({"read": format!("{a_uv}/evil.pth")}),
    );
    assert_eq!(kept.as_deref(), Ok("pwned\n"));
}

#[test]
fn a_code_running_file_a_server_creates_is_reported_and_pinned_from_its_next_start() {
    let v = Victim::new();
    let (c, client) = v.start(None, json!({}));
    let envrc = v.env.ws.join(".envrc");
    // A file cannot be held absent: the server can make it...
    attempt(&client, json!({"write": p(&envrc)})).unwrap();
    let s = c.wait_for("a note on evil", |s| {
        mcp(s, "evil")
            .and_then(|m| m.status.sandbox.as_ref())
            .is_some_and(|b| {
                b.notes
                    .iter()
                    .any(|n| n.contains(".envrc") && n.contains("created"))
            })
    });
    assert!(mcp(&s, "evil").is_some());
    let events = v.env.run(&["events", "-o", "json"]).stdout;
    assert!(
        events.contains("ProtectedFileCreated") && events.contains(".envrc"),
        "{events}"
    );
    // ...and it is pinned for the server's next process.
    assert_eq!(v.env.run(&["restart", "evil"]).code, 0);
    let s = c.wait_for("evil Ready again", |s| {
        ready(s, "evil")
            && mcp(s, "evil")
                .and_then(|m| m.status.sandbox.as_ref())
                .is_some_and(|b| b.pinned.iter().any(|p| p.ends_with(".envrc")))
    });
    let describe = v.env.run(&["describe", "evil"]).stdout;
    assert!(
        describe.contains("Pinned") && describe.contains(".envrc"),
        "{describe}"
    );
    drop(s);
    let client = Hostile {
        client: v.rt.block_on(attach(&v.env, Agent::default())),
        rt: &v.rt,
    };
    assert!(attempt(&client, json!({"write": p(&envrc)})).is_err());
    drop(client);
}

#[test]
fn an_unconfined_server_is_the_easiest_thing_to_spot() {
    let v = Victim::new();
    let (c, _client) = v.start(Some(json!("off")), json!({}));
    let s = c.status();
    let sandbox = mcp(&s, "evil").unwrap().status.sandbox.clone().unwrap();
    assert_eq!(
        (sandbox.profile.as_str(), sandbox.enforcement),
        ("off", Enforcement::None)
    );
    let wide = v.env.run(&["status", "-o", "wide"]).stdout;
    let row = wide.lines().find(|l| l.contains("evil")).unwrap();
    assert!(row.contains("off (None)"), "{wide}");
    let describe = v.env.run(&["describe", "evil"]).stdout;
    assert!(
        describe.contains("Profile:")
            && describe.contains("off")
            && describe.contains("all your privileges"),
        "{describe}"
    );
}

#[test]
fn an_unknown_profile_is_an_invalid_entry_at_its_place_never_retried() {
    let env = Env::new();
    let mut entry = unrecorded(env.fake_mcp("srv", tools(&["t1"])));
    entry["sandbox"] = json!("nnoe");
    let text = format!(
        "{{\n  \"mcpServers\": {{\n    \"srv\": {}\n  }}\n}}\n",
        serde_json::to_string(&entry).unwrap()
    );
    env.write_home("settings.json", &text);
    let validate = env.run(&["validate"]);
    assert_eq!(validate.code, 1, "{}{}", validate.stdout, validate.stderr);
    let settings = env.home.join("settings.json");
    assert!(
        validate
            .stdout
            .contains(&format!("{}:3:", settings.display()))
            && validate.stdout.contains("no sandbox profile \"nnoe\"")
            && validate.stdout.contains("did you mean \"none\""),
        "{}",
        validate.stdout
    );
    let c = env.start(&[]);
    let s = c.wait_for("srv invalid", |s| {
        mcp(s, "srv").is_some_and(|m| m.status.reason == Some(Reason::InvalidSpec))
    });
    let status = &mcp(&s, "srv").unwrap().status;
    assert_eq!(
        (status.phase, status.restarts, status.pid),
        (Phase::Failed, 0, None)
    );
    assert!(
        status
            .message
            .as_deref()
            .unwrap_or_default()
            .contains(&format!("{}:3:", settings.display())),
        "{:?}",
        status.message
    );
    // Fixed: it starts.
    let mut fixed = entry.clone();
    fixed["sandbox"] = json!("none");
    env.write_home(
        "settings.json",
        &json!({"mcpServers": {"srv": fixed}}).to_string(),
    );
    c.wait_for("srv Ready", |s| ready(s, "srv"));
}

#[test]
fn validate_refuses_a_literal_credential_when_references_are_required() {
    let env = Env::new();
    env.write(
        ".mcp.json",
        &json!({"mcpServers": {"x": {"command": "echo", "env": {"GITHUB_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}}}}).to_string(),
    );
    env.write_home(
        "settings.json",
        &json!({"steward": {"secrets": {"requireReferences": true}}}).to_string(),
    );
    let run = env.run(&["validate"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("requireReferences") && run.stdout.contains("steward secret move"),
        "{}",
        run.stdout
    );
}

#[test]
fn prune_removes_the_homes_of_servers_that_are_gone() {
    let env = Env::new();
    let keep = unrecorded(env.fake_mcp("keep", tools(&["t1"])));
    let gone = unrecorded(env.fake_mcp("gone", tools(&["t1"])));
    env.write_home(
        "settings.json",
        &json!({"mcpServers": {"keep": keep.clone(), "gone": gone}}).to_string(),
    );
    let c = env.start(&[]);
    let s = c.wait_for("both Ready", |s| ready(s, "keep") && ready(s, "gone"));
    let home_of = |name: &str| {
        mcp(&s, name)
            .unwrap()
            .status
            .sandbox
            .clone()
            .unwrap()
            .home
            .unwrap()
    };
    let (kept, removed) = (home_of("keep"), home_of("gone"));
    assert!(Path::new(&kept).is_dir() && Path::new(&removed).is_dir());
    env.write_home(
        "settings.json",
        &json!({"mcpServers": {"keep": keep}}).to_string(),
    );
    c.wait_for("gone removed", |s| mcp(s, "gone").is_none());
    let dry = env.run(&["sandbox", "prune", "--dry-run", "-o", "json"]);
    let doc: Value = serde_json::from_str(&dry.stdout).unwrap();
    assert_eq!(doc["servers"], json!([removed]));
    assert!(Path::new(&removed).is_dir(), "a dry run removes nothing");
    let run = env.run(&["sandbox", "prune"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("removed 1 server home"),
        "{}",
        run.stdout
    );
    assert!(!Path::new(&removed).exists() && Path::new(&kept).is_dir());
    drop(c);
}

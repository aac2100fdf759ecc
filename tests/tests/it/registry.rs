//! `steward search`, `add`, `outdated`, `update` against registries of our
//! own (`steward_tests::registry_fixture`: the `/v0.1` API with cursors,
//! search, status changes, versions published mid-test and fault knobs,
//! beside an npm registry, a PEP 503 index and bundles on the same loopback
//! server), with packages built for real (`npm pack`, a wheel with its
//! RECORD). No outside network. The envtests that run what `add` wrote
//! with the real `npx` and `uvx` are in `registry_peers.rs`.

use std::io::{Read as _, Write as _};
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use steward_tests::harness::{Env, Run, run_with_input};
use steward_tests::package_fixtures::{Packed, npm_pack, publish_npm};
use steward_tests::registry_fixture::{Fault, RegistryFixture};

use crate::common::peer;

/// The registry name of the npm test server.
pub const WEATHER: &str = "io.github.stewardtest/weather";

/// The publisher metadata ToolHive's registry writes: a permission profile
/// for package `key`.
pub fn publisher(key: &str, profile: Value) -> Value {
    json!({"io.modelcontextprotocol.registry/publisher-provided":
           {"io.github.stacklok": {key: {"tier": "Community", "permissions": profile}}}})
}

/// `server.json` of the npm test server `version`: a required secret
/// (WEATHER_KEY), an optional value with choices (UNITS), and the
/// publisher's profile `profile` (`None`: none published).
pub fn weather(reg: &RegistryFixture, version: &str, profile: Option<Value>) -> Value {
    let mut s = json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": WEATHER, "title": "Weather", "version": version,
        "description": "Weather for the tests",
        "packages": [{
            "registryType": "npm", "registryBaseUrl": format!("{}/npm", reg.url()),
            "identifier": "weather-fixture", "version": version,
            "transport": {"type": "stdio"},
            "environmentVariables": [
                {"name": "WEATHER_KEY", "description": "API key", "isSecret": true, "isRequired": true},
                {"name": "UNITS", "default": "metric", "choices": ["metric", "imperial"]}
            ]
        }]
    });
    if let Some(profile) = profile {
        s["_meta"] = publisher("weather-fixture", profile);
    }
    s
}

/// A registry with the npm test package's `versions` packed and published
/// to its npm registry (not yet to the MCP registry).
pub fn with_npm(env: &Env, versions: &[&str]) -> (RegistryFixture, Vec<Packed>) {
    let reg = RegistryFixture::start();
    let packed: Vec<Packed> = versions
        .iter()
        .map(|v| npm_pack(env.root.path(), "weather-fixture", v, "weather-fixture"))
        .collect();
    let list: Vec<(&str, &str, &Packed)> = versions
        .iter()
        .zip(&packed)
        .map(|(v, p)| (*v, "weather-fixture", p))
        .collect();
    publish_npm(&reg, "weather-fixture", &list);
    (reg, packed)
}

/// `steward <args> --registry URL` in the workspace, stdin `input`, with
/// the test's PATH (the package runners are looked up on it).
pub fn steward_with(env: &Env, reg: &RegistryFixture, args: &[&str], input: &str) -> Run {
    let mut all: Vec<&str> = args.to_vec();
    let url = reg.url();
    all.extend(["--registry", &url]);
    let mut command = env.command(&all);
    command.env("STEWARD_NOW", "2026-01-02T03:04:05Z");
    run_with_input(command, input.as_bytes())
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    steward_schema::jsonc::parse(&text).unwrap().value
}

/// Every file under `dir` whose bytes contain `needle`.
pub fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file()
                && let Ok(bytes) = std::fs::read(&path)
                && bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
            {
                out.push(path.display().to_string());
            }
        }
    }
    out
}

#[test]
fn search_follows_cursors_and_says_what_each_server_offers() {
    let env = Env::new();
    let reg = RegistryFixture::start();
    reg.set_page_size(2);
    for (i, name) in ["alpha", "bravo", "charlie", "delta"].iter().enumerate() {
        let mut s = json!({"name": format!("io.github.stewardtest/{name}"), "version": format!("1.{i}.0"),
                           "title": name, "description": "d",
                           "packages": [{"registryType": "pypi", "identifier": name, "version": "1"}]});
        if i == 1 {
            s["remotes"] = json!([{"type": "streamable-http", "url": "https://x/mcp"}]);
            s["_meta"] = publisher(
                name,
                json!({"network": {"outbound": {"allow_host": [".x.io"]}}}),
            );
        }
        reg.publish(s, if i == 2 { "deprecated" } else { "active" });
    }
    // Older versions are not listed; a deleted server is left out.
    reg.publish(json!({"name": "io.github.stewardtest/alpha", "version": "2.0.0",
                       "packages": [{"registryType": "npm", "identifier": "a", "version": "2.0.0"}]}), "active");
    reg.publish(
        json!({"name": "io.github.stewardtest/echo", "version": "1.0.0"}),
        "deleted",
    );
    reg.publish(
        json!({"name": "io.other/zulu", "version": "1.0.0"}),
        "active",
    );

    let run = steward_with(&env, &reg, &["search", "stewardtest", "-o", "json"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let names: Vec<&str> = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "io.github.stewardtest/bravo",
            "io.github.stewardtest/charlie",
            "io.github.stewardtest/delta",
            "io.github.stewardtest/alpha"
        ],
        "{doc}"
    );
    let item = |n: &str| {
        doc["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == n)
            .unwrap()
            .clone()
    };
    let bravo = item("io.github.stewardtest/bravo");
    assert_eq!(bravo["transports"], json!(["stdio", "streamable-http"]));
    assert_eq!(bravo["packages"], json!(["pypi"]));
    assert_eq!(bravo["permissions"], true);
    assert_eq!(
        item("io.github.stewardtest/charlie")["status"],
        "deprecated"
    );
    assert_eq!(item("io.github.stewardtest/alpha")["version"], "2.0.0");
    assert_eq!(item("io.github.stewardtest/delta")["permissions"], false);
    // Four servers at two per page: the cursors were followed.
    let pages = reg
        .requests()
        .iter()
        .filter(|r| r.starts_with("/v0.1/servers?"))
        .count();
    assert!(pages >= 2, "{:?}", reg.requests());

    let table = steward_with(&env, &reg, &["search", "stewardtest"], "");
    assert_eq!(table.code, 0, "{}", table.stderr);
    let lines: Vec<&str> = table.stdout.lines().collect();
    for header in [
        "NAME",
        "TITLE",
        "VERSION",
        "TRANSPORTS",
        "PACKAGES",
        "PERMISSIONS",
    ] {
        assert!(lines[0].contains(header), "{}", table.stdout);
    }
    assert!(
        lines.iter().any(|l| l.contains("1.2.0 (deprecated)")),
        "{}",
        table.stdout
    );
}

#[test]
fn an_unreachable_slow_or_broken_registry_answers_from_the_cache_and_says_so() {
    let env = Env::new();
    let reg = RegistryFixture::start();
    reg.publish(json!({"name": "io.github.stewardtest/cached", "version": "1.0.0",
                       "packages": [{"registryType": "npm", "identifier": "c", "version": "1.0.0"}]}), "active");
    let fresh = steward_with(&env, &reg, &["search", "cached", "-o", "json"], "");
    assert_eq!(fresh.code, 0, "{}", fresh.stderr);
    assert!(!fresh.stderr.contains("cache"), "{}", fresh.stderr);
    let listed = |run: &Run| {
        let doc: Value =
            serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout));
        doc["items"][0]["name"].as_str().map(str::to_owned)
    };
    // The time is that of the answer cached (STEWARD_NOW of the first run).
    // Only the slow registry gets a short timeout: a loaded machine's
    // answers may be slow, never wrong.
    for (fault, timeout, why) in [
        (Fault::Status(500), "20s", "answered 500"),
        (Fault::Malformed, "20s", "not JSON"),
        (
            Fault::Slow(Duration::from_secs(10)),
            "1s",
            "no answer within the timeout",
        ),
    ] {
        reg.set_fault(fault);
        let run = steward_with(
            &env,
            &reg,
            &[
                "search",
                "cached",
                "-o",
                "json",
                "--registry-timeout",
                timeout,
            ],
            "",
        );
        assert_eq!(run.code, 0, "{fault:?}: {}", run.stderr);
        assert_eq!(
            listed(&run).as_deref(),
            Some("io.github.stewardtest/cached"),
            "{fault:?}"
        );
        assert!(
            run.stderr
                .contains("answered from the cache of 2026-01-02T03:04:05Z")
                && run.stderr.contains(why),
            "{fault:?}: {}",
            run.stderr
        );
    }
    // --offline asks nobody.
    reg.set_fault(Fault::None);
    let before = reg.requests().len();
    let offline = steward_with(
        &env,
        &reg,
        &["search", "cached", "-o", "json", "--offline"],
        "",
    );
    assert_eq!(offline.code, 0, "{}", offline.stderr);
    assert_eq!(
        listed(&offline).as_deref(),
        Some("io.github.stewardtest/cached")
    );
    assert!(
        offline
            .stderr
            .contains("--offline; answered from the cache"),
        "{}",
        offline.stderr
    );
    assert_eq!(reg.requests().len(), before, "--offline made requests");
    // What was never fetched cannot be answered: said so.
    reg.set_fault(Fault::Status(503));
    let never = steward_with(&env, &reg, &["search", "nothing-like-it"], "");
    assert_eq!(never.code, 1, "{}", never.stdout);
    // A registry that is gone altogether.
    let url = reg.url();
    drop(reg);
    let gone = Run::from(
        env.command(&["search", "cached", "-o", "json", "--registry", &url])
            .output()
            .unwrap(),
    );
    assert_eq!(gone.code, 0, "{}", gone.stderr);
    assert_eq!(
        listed(&gone).as_deref(),
        Some("io.github.stewardtest/cached")
    );
    assert!(
        gone.stderr.contains("cannot connect")
            && gone.stderr.contains("answered from the cache of"),
        "{}",
        gone.stderr
    );
    assert!(
        never
            .stderr
            .contains("no registry answered and nothing is cached"),
        "{}",
        never.stderr
    );
}

#[test]
fn deleted_versions_are_refused_and_deprecated_ones_warned() {
    let env = Env::new();
    let (reg, _) = with_npm(&env, &["1.0.0", "1.1.0"]);
    reg.publish(weather(&reg, "1.0.0", None), "deprecated");
    reg.publish(weather(&reg, "1.1.0", None), "active");
    reg.set_status(WEATHER, "1.1.0", "deleted");
    let deleted = steward_with(
        &env,
        &reg,
        &["add", &format!("{WEATHER}@1.1.0"), "--dry-run"],
        "",
    );
    assert_eq!(deleted.code, 1, "{}", deleted.stdout);
    assert!(
        deleted.stderr.contains("marks it deleted") && deleted.stderr.contains("refused"),
        "{}",
        deleted.stderr
    );
    let old = steward_with(
        &env,
        &reg,
        &["add", &format!("{WEATHER}@1.0.0"), "--dry-run"],
        "",
    );
    assert_eq!(old.code, 0, "{}", old.stderr);
    // A dry run asks for nothing: the plan says what would be asked.
    assert!(
        old.stdout
            .contains("WEATHER_KEY=${secret:weather.WEATHER_KEY}  (would be asked for)"),
        "{}",
        old.stdout
    );
    assert!(
        old.stderr
            .contains("warning: io.github.stewardtest/weather@1.0.0 is deprecated"),
        "{}",
        old.stderr
    );
    assert!(
        old.stdout.contains("status     deprecated"),
        "{}",
        old.stdout
    );
    assert!(
        old.stdout.contains("dry run: nothing was written"),
        "{}",
        old.stdout
    );
    assert!(!env.ws.join(".mcp.json").exists() && !env.ws.join(".mcp.lock.json").exists());
}

#[test]
fn a_non_interactive_add_missing_a_required_value_writes_nothing() {
    let env = Env::new();
    let (reg, _) = with_npm(&env, &["1.0.0"]);
    let mut s = weather(&reg, "1.0.0", None);
    s["packages"][0]["environmentVariables"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "REGION", "description": "Where", "isRequired": true}));
    reg.publish(s, "active");
    let run = steward_with(&env, &reg, &["add", WEATHER, "--yes"], "");
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stderr.contains("REGION (environment variable: Where)")
            && run
                .stderr
                .contains("WEATHER_KEY (environment variable: API key)")
            && run.stderr.contains("--set KEY=VALUE")
            && run.stderr.contains("--secrets-stdin"),
        "{}",
        run.stderr
    );
    // A secret is never taken from the command line.
    let argv = steward_with(
        &env,
        &reg,
        &[
            "add",
            WEATHER,
            "--yes",
            "--set",
            "WEATHER_KEY=x",
            "--set",
            "REGION=eu",
        ],
        "",
    );
    assert_eq!(argv.code, 1);
    assert!(
        argv.stderr.contains("never read from the command line"),
        "{}",
        argv.stderr
    );
    // A wrong choice is refused before anything happens.
    let wrong = steward_with(
        &env,
        &reg,
        &[
            "add",
            WEATHER,
            "--yes",
            "--set",
            "UNITS=kelvin",
            "--set",
            "REGION=eu",
            "--secrets-stdin",
        ],
        "WEATHER_KEY=k\n",
    );
    assert_eq!(wrong.code, 1);
    assert!(
        wrong.stderr.contains("expected one of metric, imperial"),
        "{}",
        wrong.stderr
    );
    // Without --yes and without a terminal: the plan, then a refusal.
    let unconfirmed = steward_with(
        &env,
        &reg,
        &["add", WEATHER, "--set", "REGION=eu", "--secrets-stdin"],
        "WEATHER_KEY=k\n",
    );
    assert_eq!(unconfirmed.code, 1);
    assert!(
        unconfirmed.stdout.contains("Plan: add"),
        "{}",
        unconfirmed.stdout
    );
    assert!(
        unconfirmed.stderr.contains("--yes"),
        "{}",
        unconfirmed.stderr
    );
    for file in [".mcp.json", ".mcp.lock.json"] {
        assert!(!env.ws.join(file).exists(), "{file} was written");
    }
    assert!(!env.home.join("mcpApprovals.json").exists());
    assert!(
        !env.home.join("steward/secrets.json").exists(),
        "a secret was stored"
    );
}

#[test]
fn add_edits_mcp_json_keeping_the_rest_locks_approves_and_keeps_the_secret_in_the_store() {
    let env = Env::new();
    let (reg, packed) = with_npm(&env, &["1.0.0"]);
    let profile =
        json!({"network": {"outbound": {"allow_host": [".weather.example"], "allow_port": [443]}}});
    reg.publish(weather(&reg, "1.0.0", Some(profile)), "active");
    // Everything but the new entry (and the comma before it) stays as it is.
    let head = "{\n  // Servers of this project; keep them sorted.\n  \"mcpServers\": {\n    /* the first one */\n    \"other\": {\"command\": \"steward-test-missing\", \"args\": [\"--x\"]}";
    let trailing = " // trailing\n";
    let tail = "  },\n  \"note\": \"kept\"\n}\n";
    let original = format!("{head}{trailing}{tail}");
    env.write(".mcp.json", &original);
    let secret = "s3cret-value-9f2a";
    let run = steward_with(
        &env,
        &reg,
        &[
            "add",
            WEATHER,
            "--set",
            "UNITS=imperial",
            "--secrets-stdin",
            "--yes",
        ],
        &format!("WEATHER_KEY={secret}\n"),
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let plan = &run.stdout;
    for shown in [
        "Plan: add io.github.stewardtest/weather 1.0.0 from",
        "npx --yes weather-fixture@1.0.0",
        &packed[0].integrity,
        "WEATHER_KEY=${secret:weather.WEATHER_KEY}",
        "UNITS=imperial  (given)",
        "the publisher's permission profile",
        "approved weather",
    ] {
        assert!(plan.contains(shown), "missing {shown:?} in:\n{plan}");
    }
    // The profile allows port 443 only: our npm registry's port is not on
    // it, and the plan says the proxy will refuse npx (as the runtime would).
    let port = url::Url::parse(&reg.url()).unwrap().port().unwrap();
    for shown in [
        format!("warning: npx's registry (127.0.0.1) is on port {port}"),
        "the egress proxy will refuse it".to_owned(),
    ] {
        assert!(plan.contains(&shown), "missing {shown:?} in:\n{plan}");
    }
    // The rest of the file: every byte as it was.
    let text = std::fs::read_to_string(env.ws.join(".mcp.json")).unwrap();
    assert!(text.starts_with(&format!("{head},{trailing}")), "{text}");
    assert!(text.ends_with(&format!("\n{tail}")), "{text}");
    // The new entry as a reader expects it: what runs first.
    let at = |k: &str| text.find(&format!("\"{k}\"")).unwrap();
    assert!(
        at("command") < at("args") && at("args") < at("env") && at("env") < at("sandbox"),
        "{text}"
    );
    let written = read_json(&env.ws.join(".mcp.json"));
    let entry = &written["mcpServers"]["weather"];
    assert_eq!(entry["command"], "npx");
    assert_eq!(entry["args"], json!(["--yes", "weather-fixture@1.0.0"]));
    assert_eq!(
        entry["env"],
        json!({"WEATHER_KEY": "${secret:weather.WEATHER_KEY}", "UNITS": "imperial",
               "npm_config_registry": format!("{}/npm/", reg.url())})
    );
    assert_eq!(
        entry["sandbox"],
        json!({"network": {"outbound": {"allow_host": ["weather.example", "*.weather.example"], "allow_port": [443]}}})
    );
    // The lock beside it.
    let lock = read_json(&env.ws.join(".mcp.lock.json"));
    let rec = &lock["servers"]["weather"];
    assert_eq!(lock["lockfileVersion"], 1);
    assert_eq!(rec["registry"], reg.url());
    assert_eq!(
        (rec["name"].as_str(), rec["version"].as_str()),
        (Some(WEATHER), Some("1.0.0"))
    );
    assert_eq!(rec["package"]["integrity"], packed[0].integrity.as_str());
    assert_eq!(rec["args"], json!(["--yes", "weather-fixture@1.0.0"]));
    assert_eq!(rec["given"], json!({"UNITS": ["imperial"]}));
    assert_eq!(rec["sandboxFrom"], "publisher");
    // Approved for the hash Steward computes, and admitted.
    let status = env.status_json(&[]);
    let item = steward_tests::harness::item(&status, "McpServer", "weather");
    let hash = item["spec"]["approvalHash"].as_str().unwrap();
    let approvals = read_json(&env.home.join("mcpApprovals.json"));
    let ws = env.ws.to_str().unwrap();
    assert_eq!(
        approvals[ws]["weather"],
        json!({"hash": hash, "status": "approved"})
    );
    assert_ne!(item["status"]["reason"], "PendingApproval", "{item}");
    // The secret's value: in the store and nowhere else.
    let holders = [
        files_containing(&env.home, secret),
        files_containing(&env.ws, secret),
    ]
    .concat();
    assert_eq!(
        holders,
        [env.home.join("steward/secrets.json").display().to_string()]
    );
    assert!(!run.stdout.contains(secret) && !run.stderr.contains(secret));

    // Added again under the same name: refused, pointing at update.
    let again = steward_with(
        &env,
        &reg,
        &["add", WEATHER, "--yes", "--secrets-stdin"],
        "WEATHER_KEY=x\n",
    );
    assert_eq!(again.code, 1);
    assert!(
        again.stderr.contains("steward update weather"),
        "{}",
        again.stderr
    );
}

/// `qwen mcp list` in the test's sandbox: its line for `name`.
fn qwen_line(env: &Env, name: &str) -> String {
    let out = Command::new(peer("@qwen-code/qwen-code", "node_modules/.bin/qwen"))
        .args(["mcp", "list"])
        .current_dir(&env.ws)
        .env_clear()
        .envs(std::env::var("PATH").map(|p| ("PATH".to_owned(), p)))
        .envs(env.vars())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run qwen");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "qwen mcp list: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find(|l| l.contains(&format!("{name}:")))
        .unwrap_or_else(|| panic!("qwen mcp list shows no {name}:\n{text}"))
        .to_owned()
}

#[test]
fn qwen_code_loads_what_add_writes_and_honours_its_approval() {
    let env = Env::new();
    let (reg, _) = with_npm(&env, &["1.0.0"]);
    reg.publish(weather(&reg, "1.0.0", None), "active");
    let unapproved = steward_with(
        &env,
        &reg,
        &[
            "add",
            WEATHER,
            "--as",
            "pending",
            "--no-approve",
            "--yes",
            "--secrets-stdin",
        ],
        "WEATHER_KEY=k\n",
    );
    assert_eq!(unapproved.code, 0, "{}", unapproved.stderr);
    assert!(qwen_line(&env, "pending").contains("Pending approval"));
    let approved = steward_with(
        &env,
        &reg,
        &["add", WEATHER, "--yes", "--secrets-stdin"],
        "WEATHER_KEY=k\n",
    );
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    // Qwen Code computes the hash of the entry itself: not pending means
    // the record Steward wrote is the one it would have written.
    let line = qwen_line(&env, "weather");
    assert!(
        !line.contains("Pending approval") && !line.contains("Rejected"),
        "{line}"
    );
}

/// A child with its stdin and stderr on a pseudo-terminal (what it asks
/// arrives on [`Pty::expect`]; [`Pty::answer`] types a line).
struct Pty {
    master: std::fs::File,
    text: mpsc::Receiver<String>,
    seen: String,
    /// `None` once finished; a test that fails before kills it on drop.
    child: Option<std::process::Child>,
}

impl Drop for Pty {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Pty {
    #[allow(unsafe_code)]
    fn spawn(mut command: Command) -> Pty {
        let (mut master, mut slave) = (0, 0);
        // SAFETY: openpty fills two descriptors we then own.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "openpty");
        // SAFETY: both descriptors were just opened and are owned here only.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let child = command
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn under a pty");
        let master = std::fs::File::from(master);
        let mut reader = master.try_clone().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0
                    || tx
                        .send(String::from_utf8_lossy(&buf[..n]).into_owned())
                        .is_err()
                {
                    break;
                }
            }
        });
        Pty {
            master,
            text: rx,
            seen: String::new(),
            child: Some(child),
        }
    }

    /// Waits until the terminal shows `needle` (deadline 60 s).
    fn expect(&mut self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.seen.contains(needle) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.text.recv_timeout(left) {
                Ok(chunk) => self.seen.push_str(&chunk),
                Err(_) => panic!(
                    "the terminal never showed {needle:?}; it showed:\n{}",
                    self.seen
                ),
            }
        }
        self.seen.clear();
    }

    fn answer(&mut self, line: &str) {
        self.master
            .write_all(format!("{line}\n").as_bytes())
            .unwrap();
    }

    fn finish(mut self) -> Run {
        let child = self.child.take().expect("not finished yet");
        Run::from(child.wait_with_output().unwrap())
    }
}

#[test]
fn outdated_and_update_ask_again_when_an_update_widens() {
    let env = Env::new();
    let (reg, packed) = with_npm(&env, &["1.0.0", "1.1.0", "1.2.0"]);
    reg.publish(weather(&reg, "1.0.0", None), "active");
    let added = steward_with(
        &env,
        &reg,
        &["add", WEATHER, "--yes", "--secrets-stdin"],
        "WEATHER_KEY=k\n",
    );
    assert_eq!(added.code, 0, "{}", added.stderr);
    let up_to_date = steward_with(&env, &reg, &["outdated"], "");
    assert_eq!(up_to_date.code, 0, "{}", up_to_date.stderr);
    assert!(
        up_to_date.stderr.contains("at its latest version"),
        "{}",
        up_to_date.stderr
    );

    // 1.1.0: the publisher now lists a host (none → a host through the
    // proxy: wider) and a second secret.
    reg.publish(with_signing(&reg, "1.1.0"), "active");
    let outdated = steward_with(&env, &reg, &["outdated", "-o", "json"], "");
    assert_eq!(outdated.code, 0, "{}", outdated.stderr);
    let doc: Value = serde_json::from_str(&outdated.stdout).unwrap();
    let row = &doc["items"][0];
    assert_eq!(
        (
            row["name"].as_str(),
            row["current"].as_str(),
            row["latest"].as_str()
        ),
        (Some("weather"), Some("1.0.0"), Some("1.1.0"))
    );
    assert_eq!(row["widens"], true, "{row}");
    let changes = row["changes"].to_string();
    for change in [
        "argv",
        "+secret WEATHER_SIGNING",
        "sandbox widens: connects to api.weather.example",
    ] {
        assert!(changes.contains(change), "{change} not in {changes}");
    }

    let before = std::fs::read(env.ws.join(".mcp.json")).unwrap();
    let approvals_before = std::fs::read(env.home.join("mcpApprovals.json")).unwrap();
    // Nobody to ask and no --yes: refused, nothing written.
    let refused = steward_with(
        &env,
        &reg,
        &["update", "--secrets-stdin"],
        "WEATHER_SIGNING=sig\n",
    );
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert!(
        refused.stdout.contains("it needs your acceptance"),
        "{}",
        refused.stdout
    );
    assert!(refused.stderr.contains("--yes"), "{}", refused.stderr);
    assert_eq!(std::fs::read(env.ws.join(".mcp.json")).unwrap(), before);

    // Asked at a terminal: "no" writes nothing; "yes" updates, stores the
    // new secret (asked without echo) and moves the approval.
    let url = reg.url();
    let update = |env: &Env| {
        let mut c = env.command(&["update", "weather", "--registry", &url]);
        c.env("STEWARD_NOW", "2026-01-02T03:04:05Z");
        Pty::spawn(c)
    };
    let mut no = update(&env);
    no.expect("stored as weather.WEATHER_SIGNING, not echoed");
    no.answer("sig-value");
    no.expect("Update weather? [y/N]");
    no.answer("n");
    let no = no.finish();
    assert_eq!(no.code, 0, "{}", no.stdout);
    assert!(
        no.stdout
            .contains("weather not updated: nothing was written"),
        "{}",
        no.stdout
    );
    assert_eq!(std::fs::read(env.ws.join(".mcp.json")).unwrap(), before);
    assert_eq!(
        std::fs::read(env.home.join("mcpApprovals.json")).unwrap(),
        approvals_before
    );

    let mut yes = update(&env);
    yes.expect("not echoed");
    yes.answer("sig-value");
    yes.expect("Update weather? [y/N]");
    yes.answer("y");
    let yes = yes.finish();
    assert_eq!(yes.code, 0, "{}", yes.stdout);
    let entry = &read_json(&env.ws.join(".mcp.json"))["mcpServers"]["weather"];
    assert_eq!(entry["args"][1], "weather-fixture@1.1.0");
    assert_eq!(
        entry["env"]["WEATHER_SIGNING"],
        "${secret:weather.WEATHER_SIGNING}"
    );
    let lock = read_json(&env.ws.join(".mcp.lock.json"));
    assert_eq!(lock["servers"]["weather"]["version"], "1.1.0");
    assert_eq!(
        lock["servers"]["weather"]["package"]["integrity"],
        packed[1].integrity.as_str()
    );
    let status = env.status_json(&[]);
    let item = steward_tests::harness::item(&status, "McpServer", "weather");
    assert_eq!(
        read_json(&env.home.join("mcpApprovals.json"))[env.ws.to_str().unwrap()]["weather"]["hash"],
        item["spec"]["approvalHash"]
    );
    assert_ne!(item["status"]["reason"], "PendingApproval");
    assert!(
        std::fs::read_to_string(env.home.join("steward/secrets.json"))
            .unwrap()
            .contains("sig-value")
    );

    // 1.2.0 changes nothing but the version: applied without asking.
    reg.publish(with_signing(&reg, "1.2.0"), "active");
    let quiet = steward_with(&env, &reg, &["update"], "");
    assert_eq!(quiet.code, 0, "{}\n{}", quiet.stdout, quiet.stderr);
    assert!(
        !quiet.stdout.contains("needs your acceptance"),
        "{}",
        quiet.stdout
    );
    assert_eq!(
        read_json(&env.ws.join(".mcp.lock.json"))["servers"]["weather"]["version"],
        "1.2.0"
    );
    assert!(
        quiet.stdout.contains("approved weather"),
        "{}",
        quiet.stdout
    );
}

/// The server.json of `version` with 1.1.0's second secret and profile.
fn with_signing(reg: &RegistryFixture, version: &str) -> Value {
    let mut s = weather(
        reg,
        version,
        Some(json!({"network": {"outbound": {"allow_host": ["api.weather.example"]}}})),
    );
    s["packages"][0]["environmentVariables"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "WEATHER_SIGNING", "isSecret": true, "isRequired": true}));
    s
}

#[test]
fn registries_come_from_user_settings_and_user_scope_writes_the_user_settings() {
    let env = Env::new();
    let (reg, _) = with_npm(&env, &["1.0.0"]);
    reg.publish(weather(&reg, "1.0.0", None), "active");
    // The workspace cannot choose where servers come from.
    env.write(
        ".qwen/settings.json",
        r#"{"steward": {"registries": ["http://127.0.0.1:9"]}}"#,
    );
    let warned = env.run(&["validate"]);
    assert!(
        warned
            .stdout
            .contains("steward.registries is read only from your user and system settings"),
        "{}",
        warned.stdout
    );
    env.write_home(
        "settings.json",
        &format!(
            "{{\n  // mine\n  \"steward\": {{\"registries\": [\"{}/\"]}}\n}}\n",
            reg.url()
        ),
    );
    let mut search = env.command(&["search", "weather", "-o", "json"]);
    let found: Value = serde_json::from_slice(&search.output().unwrap().stdout).unwrap();
    assert_eq!(found["registries"], json!([reg.url()]), "{found}");
    assert_eq!(found["items"][0]["name"], WEATHER);

    let added = run_with_input(
        env.command(&[
            "add",
            WEATHER,
            "--scope",
            "user",
            "--yes",
            "--secrets-stdin",
        ]),
        b"WEATHER_KEY=k\n",
    );
    assert_eq!(added.code, 0, "{}", added.stderr);
    assert!(
        added
            .stdout
            .contains("none needed (user settings are not approval-gated)"),
        "{}",
        added.stdout
    );
    let text = std::fs::read_to_string(env.home.join("settings.json")).unwrap();
    assert!(text.starts_with("{\n  // mine\n"), "{text}");
    let settings = read_json(&env.home.join("settings.json"));
    assert_eq!(settings["mcpServers"]["weather"]["command"], "npx");
    let lock = read_json(&env.home.join("settings.lock.json"));
    assert_eq!(lock["servers"]["weather"]["version"], "1.0.0");
    assert!(!env.ws.join(".mcp.json").exists() && !env.home.join("mcpApprovals.json").exists());
    let status = env.status_json(&[]);
    let item = steward_tests::harness::item(&status, "McpServer", "weather");
    assert_eq!(item["spec"]["scope"], "user");
    assert_ne!(item["status"]["reason"], "PendingApproval");
}

//! Envtests: what `steward add` writes, run by the real controller with
//! the real package runners — `npx` fetching from our npm registry, `uvx`
//! from our PEP 503 index — through the egress proxy the sandbox gives a
//! runner under `none` or the publisher's profile; a remote whose header
//! carries a secret; an MCP bundle run only when its sha256 matches. The
//! registries are our own, on loopback (`registry.rs`): no outside network.

use std::time::Duration;

use serde_json::json;
use steward_schema::canonical::sha256_hex;
use steward_schema::resource::{Phase, SandboxNetwork};
use steward_tests::fake_mcp::{CONFIG_ENV, FakeMcpConfig, HttpConfig};
use steward_tests::harness::{Env, Reaped, bin, mcp, wait_until};
use steward_tests::package_fixtures::{clock_wheel, node_bundle, publish_pypi};
use steward_tests::registry_fixture::RegistryFixture;

use crate::common::call_tool;
use crate::registry::{WEATHER, files_containing, steward_with, weather, with_npm};

/// A first `npx`/`uvx` run downloads and installs: slow on a loaded
/// 2-core machine.
const RUNNER_DEADLINE: Duration = Duration::from_secs(180);

#[test]
fn an_npm_server_from_the_registry_runs_with_real_npx_under_its_published_profile() {
    let env = Env::new();
    let (reg, _) = with_npm(&env, &["1.0.0"]);
    // No allow_port: the runtime adds npx's registry to the hosts but keeps
    // the profile's ports, and our registry is not on 443.
    let profile = json!({"network": {"outbound": {"allow_host": ["api.weather.example"]}}});
    reg.publish(weather(&reg, "1.0.0", Some(profile)), "active");
    let c = env.start(&[]);
    let secret = "npm-secret-7c1e";
    let added = steward_with(
        &env,
        &reg,
        &["add", WEATHER, "--secrets-stdin", "--yes"],
        &format!("WEATHER_KEY={secret}\n"),
    );
    assert_eq!(added.code, 0, "{}\n{}", added.stdout, added.stderr);
    assert!(
        added
            .stdout
            .contains("npx reaches its registry (127.0.0.1) through Steward's egress proxy"),
        "{}",
        added.stdout
    );
    let status = c.wait_for_within("weather Ready", RUNNER_DEADLINE, |s| {
        mcp(s, "weather").is_some_and(|m| m.status.phase == Phase::Ready)
    });
    let m = mcp(&status, "weather").unwrap();
    assert_eq!(m.status.tools.as_deref(), Some(&["whoami".to_owned()][..]));
    // The publisher's hosts and npx's registry, through the proxy.
    let sandbox = m.status.sandbox.as_ref().expect("a sandbox");
    assert_eq!(sandbox.network, SandboxNetwork::Proxy, "{sandbox:?}");
    // The secret reached the server (it answers with its sha256), from the store.
    let answer = call_tool(&env, "weather__whoami").to_string();
    assert!(
        answer.contains("weather-fixture@1.0.0")
            && answer.contains(&format!("key-sha256={}", sha256_hex(secret.as_bytes()))),
        "{answer}"
    );
    // npx fetched from our registry, the tarball npm packed.
    assert!(
        reg.requests()
            .iter()
            .any(|r| r.ends_with("weather-fixture-1.0.0.tgz")),
        "{:?}",
        reg.requests()
    );
    // Never in a file but the store: not in the status, logs or caches.
    let holders = [
        files_containing(&env.home, secret),
        files_containing(&env.ws, secret),
    ]
    .concat();
    assert_eq!(
        holders,
        [env.home.join("steward/secrets.json").display().to_string()]
    );
    assert!(!c.log_text().contains(secret));
}

#[test]
fn a_pypi_server_runs_the_entry_point_its_wheel_declares_with_real_uvx() {
    let env = Env::new();
    let reg = RegistryFixture::start();
    let wheel = clock_wheel("2.0.1", "tick-tock");
    publish_pypi(&reg, &[&wheel]);
    reg.publish(
        json!({"name": "io.github.stewardtest/clock", "version": "2.0.1", "description": "a clock",
               "packages": [{"registryType": "pypi", "registryBaseUrl": format!("{}/pypi", reg.url()),
                             "identifier": "clock-fixture", "version": "2.0.1"}]}),
        "active",
    );
    // Where uv finds Python and installs: never a download, never the user's.
    let c = env.start_logging_to(
        &[],
        std::process::Stdio::null(),
        &[("UV_PYTHON_DOWNLOADS", "never")],
        env.root.path().join("controller.log"),
    );
    let added = steward_with(
        &env,
        &reg,
        &["add", "io.github.stewardtest/clock", "--yes"],
        "",
    );
    assert_eq!(added.code, 0, "{}\n{}", added.stdout, added.stderr);
    assert!(
        added
            .stdout
            .contains("uvx --from clock-fixture==2.0.1 tick-tock")
            && added.stdout.contains(&format!("sha256:{}", wheel.sha256)),
        "{}",
        added.stdout
    );
    let status = c.wait_for_within("clock Ready", RUNNER_DEADLINE, |s| {
        mcp(s, "clock").is_some_and(|m| m.status.phase == Phase::Ready)
    });
    let m = mcp(&status, "clock").unwrap();
    assert_eq!(m.status.tools.as_deref(), Some(&["now".to_owned()][..]));
    assert_eq!(
        m.status.sandbox.as_ref().unwrap().network,
        SandboxNetwork::Proxy
    );
    let answer = call_tool(&env, "clock__now").to_string();
    assert!(answer.contains("clock-fixture 2.0.1"), "{answer}");
    let lock = std::fs::read_to_string(env.ws.join(".mcp.lock.json")).unwrap();
    assert!(lock.contains("\"entryPoint\": \"tick-tock\""), "{lock}");
}

#[test]
fn a_remote_server_gets_its_header_with_the_secret_from_the_store() {
    let env = Env::new();
    let port_file = env.root.path().join("remote.port");
    let token = "remote-token-51d0";
    let config = FakeMcpConfig {
        name: "remote".to_owned(),
        tools: vec!["ping_remote".to_owned()],
        http: Some(HttpConfig {
            port_file: port_file.clone(),
        }),
        bearer_tokens: Some(vec![token.to_owned()]),
        bearer_without_challenge: true,
        ..FakeMcpConfig::default()
    };
    let _fake = Reaped(
        std::process::Command::new(bin("fake-mcp-server"))
            .env(CONFIG_ENV, config.to_json())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn the fake remote"),
    );
    wait_until("the fake remote writes its port", || port_file.exists());
    let port = std::fs::read_to_string(&port_file)
        .unwrap()
        .trim()
        .to_owned();
    let reg = RegistryFixture::start();
    reg.publish(
        json!({"name": "io.github.stewardtest/remote", "version": "1.0.0",
               "remotes": [{"type": "streamable-http", "url": format!("http://127.0.0.1:{port}/mcp"),
                            "headers": [{"name": "Authorization", "value": "Bearer {token}",
                                         "variables": {"token": {"isSecret": true, "isRequired": true}}}]}]}),
        "active",
    );
    let c = env.start(&[]);
    let added = steward_with(
        &env,
        &reg,
        &[
            "add",
            "io.github.stewardtest/remote",
            "--secrets-stdin",
            "--yes",
        ],
        &format!("token={token}\n"),
    );
    assert_eq!(added.code, 0, "{}\n{}", added.stdout, added.stderr);
    assert!(
        added
            .stdout
            .contains("Authorization=Bearer ${secret:remote.token}"),
        "{}",
        added.stdout
    );
    let status = c.wait_for_within("remote Ready", RUNNER_DEADLINE, |s| {
        mcp(s, "remote").is_some_and(|m| m.status.phase == Phase::Ready)
    });
    assert_eq!(
        mcp(&status, "remote").unwrap().status.tools.as_deref(),
        Some(&["ping_remote".to_owned()][..])
    );
    let holders = [
        files_containing(&env.home, token),
        files_containing(&env.ws, token),
    ]
    .concat();
    assert_eq!(
        holders,
        [env.home.join("steward/secrets.json").display().to_string()]
    );
}

#[test]
fn an_mcp_bundle_runs_only_when_its_sha256_matches() {
    let env = Env::new();
    let reg = RegistryFixture::start();
    let (bytes, sha) = node_bundle("weather-bundle", "1.0.0");
    reg.put_file("/files/weather.mcpb", "application/octet-stream", bytes);
    let server = |version: &str, file_sha: &str| {
        json!({"name": "io.github.stewardtest/bundle", "version": version,
               "packages": [{"registryType": "mcpb", "identifier": format!("{}/files/weather.mcpb", reg.url()),
                             "version": version, "fileSha256": file_sha}]})
    };
    reg.publish(server("0.9.0", &"0".repeat(64)), "active");
    let wrong = steward_with(
        &env,
        &reg,
        &[
            "add",
            "io.github.stewardtest/bundle@0.9.0",
            "--secrets-stdin",
            "--yes",
        ],
        "weather_key=k\n",
    );
    assert_eq!(wrong.code, 1, "{}", wrong.stdout);
    assert!(
        wrong.stderr.contains(&format!("its sha256 is {sha}"))
            && wrong.stderr.contains("nothing was written"),
        "{}",
        wrong.stderr
    );
    assert!(!env.ws.join(".mcp.json").exists());
    // HOME is the sandbox's home: bundles go to its data directory.
    let bundles = env
        .home
        .join(".local/share/steward/bundles/io.github.stewardtest_bundle");
    assert!(
        !bundles.exists(),
        "a bundle that does not match was unpacked"
    );

    reg.publish(server("1.0.0", &sha), "active");
    let c = env.start(&[]);
    let secret = "bundle-secret-3a9b";
    let added = steward_with(
        &env,
        &reg,
        &[
            "add",
            "io.github.stewardtest/bundle",
            "--secrets-stdin",
            "--yes",
        ],
        &format!("weather_key={secret}\n"),
    );
    assert_eq!(added.code, 0, "{}\n{}", added.stdout, added.stderr);
    let dir = bundles.join(&sha[..16]);
    assert!(
        dir.join("manifest.json").is_file(),
        "not unpacked at {}",
        dir.display()
    );
    let status = c.wait_for_within("bundle Ready", RUNNER_DEADLINE, |s| {
        mcp(s, "bundle").is_some_and(|m| m.status.phase == Phase::Ready)
    });
    assert_eq!(
        mcp(&status, "bundle")
            .unwrap()
            .status
            .sandbox
            .as_ref()
            .unwrap()
            .network,
        SandboxNetwork::None
    );
    let answer = call_tool(&env, "bundle__whoami").to_string();
    assert!(
        answer.contains(&format!("key-sha256={}", sha256_hex(secret.as_bytes()))),
        "{answer}"
    );
}

//! Envtests of signing in against an authorization server that is not
//! Steward's: `oidc-provider` (npm, OpenID Certified; tests/clients/
//! oidc_server.mjs, on Node 22) with an MCP server it protects, and a
//! scripted browser (tests/clients/oidc_browser.mjs) that signs in as a
//! given account and approves. Refresh-token rotation, revocation (the
//! server goes `AuthRequired` once, no loop), the device flow, `--paste`
//! in a terminal, two accounts of one issuer, where tokens and a client
//! secret never show, and a sign-in through an agent that opens pages
//! (URL-mode elicitation).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, CustomNotification,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability, ErrorData,
    Implementation, UrlElicitationCapability,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};

use serde_json::{Value, json};
use steward_schema::resource::{Reason, WorkspaceStatus};
use steward_tests::harness::{Controller, Env, base_env, bin, mcp, ready, wait_until};

use crate::common::{conformance_suite, peer, peers_dir};
use crate::gateway::{Agent, attach, call, runtime, text};
use crate::metrics::{http_get, metrics_addr};
use crate::real_clients::{PyClient, Sdk, steward_mcp_argv};
use crate::secret_refs::{
    Keyring, assert_absent, environ, files_under, otlp_receiver, scrape, set_secret,
};

/// `oidc-provider` and an MCP server it protects, on Node 22 (killed on drop).
struct Oidc {
    child: Child,
    state: PathBuf,
    issuer: String,
    mcp: String,
}

impl Drop for Oidc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A child killed and reaped on drop (a failed assertion included).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The scripts under tests/clients.
fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("clients")
        .join(name)
}

impl Oidc {
    /// Starts the provider; access tokens live `access_ttl` seconds.
    fn start(env: &Env, access_ttl: u64) -> Oidc {
        Oidc::start_with(env, access_ttl, &[])
    }

    /// [`Oidc::start`] with more of the server's settings (`STATIC_*`).
    fn start_with(env: &Env, access_ttl: u64, settings: &[(&str, &str)]) -> Oidc {
        let (node, _) = conformance_suite();
        let provider = peer(
            "oidc-provider",
            "node22/node_modules/oidc-provider/lib/index.js",
        );
        // The MCP server is the TypeScript SDK's (the Node 20 peer).
        peer(
            "@modelcontextprotocol/sdk",
            "node_modules/@modelcontextprotocol/sdk/dist/esm/server/mcp.js",
        );
        let state = env.root.path().join("oidc");
        std::fs::create_dir_all(&state).unwrap();
        let child = Command::new(node)
            .arg(script("oidc_server.mjs"))
            .arg(&state)
            .env_clear()
            .envs(base_env())
            .env(
                "OIDC_PROVIDER_DIR",
                provider.parent().unwrap().parent().unwrap(),
            )
            .env(
                "STEWARD_SDK_DIR",
                peers_dir().join("node_modules/@modelcontextprotocol/sdk"),
            )
            .env("ACCESS_TTL", access_ttl.to_string())
            .envs(settings.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(state.join("server.log")).unwrap())
            .spawn()
            .expect("spawn oidc-provider");
        // Owned at once: killed on drop even if it never comes up.
        let mut oidc = Oidc {
            child,
            issuer: String::new(),
            mcp: String::new(),
            state,
        };
        let ports = oidc.state.join("ports.json");
        // Renamed into place whole once it listens.
        wait_until("oidc-provider listens", || ports.exists());
        let ports: Value = serde_json::from_str(&std::fs::read_to_string(&ports).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", ports.display()));
        oidc.issuer = ports["issuer"].as_str().unwrap().to_owned();
        oidc.mcp = ports["mcp"].as_str().unwrap().to_owned();
        oidc
    }

    /// The token requests the provider answered: `(grant_type, ok)`.
    fn token_requests(&self) -> Vec<(String, bool)> {
        std::fs::read_to_string(self.state.join("tokens.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|e| {
                (
                    e["grant_type"].as_str().unwrap_or_default().to_owned(),
                    e["ok"] == true,
                )
            })
            .collect()
    }

    /// The user revokes the grant of stored token `record` at the
    /// authorization server (its refresh token).
    fn revoke(&self, record: &Value) {
        let revoked = post_form(
            &format!("{}/token/revocation", self.issuer),
            &[
                ("token", record["refreshToken"].as_str().unwrap()),
                ("token_type_hint", "refresh_token"),
                ("client_id", record["clientId"].as_str().unwrap()),
            ],
        );
        assert_eq!(revoked, 200);
    }

    fn refreshes(&self) -> Vec<bool> {
        self.token_requests()
            .into_iter()
            .filter(|(grant, _)| grant == "refresh_token")
            .map(|(_, ok)| ok)
            .collect()
    }
}

/// The `BROWSER` that signs in as `account` and approves.
fn browser(account: &str) -> String {
    let (node, _) = conformance_suite();
    format!(
        "OIDC_ACCOUNT={account} {} {}",
        node.display(),
        script("oidc_browser.mjs").display()
    )
}

/// `steward auth login ARGS` with `browser`; stdout and stderr.
fn login(env: &Env, args: &[&str], browser: &str) -> (bool, String, String) {
    let mut all = vec!["auth", "login"];
    all.extend_from_slice(args);
    let out = env
        .command(&all)
        .env("BROWSER", browser)
        .stdin(Stdio::null())
        .output()
        .expect("run steward auth login");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The token records of Steward's file store (these tests have no Secret
/// Service on their session bus).
fn stored_tokens(env: &Env) -> Vec<Value> {
    let path = env.home.join("steward").join("oauth.json");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    file["secrets"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(key, _)| key.starts_with("token "))
        .map(|(_, v)| serde_json::from_str(v.as_str().unwrap()).unwrap())
        .collect()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn auth_required(s: &WorkspaceStatus, name: &str) -> bool {
    mcp(s, name).is_some_and(|m| m.status.reason == Some(Reason::AuthRequired))
}

/// The events of `name` with `reason` (their counts summed).
fn events(env: &Env, name: &str, reason: &str) -> u64 {
    let out = env.steward(&["events", "-o", "json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == name && e["reason"] == reason)
        .map(|e| e["count"].as_u64().unwrap_or(1))
        .sum()
}

fn whoami(env: &Env, tool: &str) -> (bool, String) {
    runtime().block_on(async {
        let client = attach(env, Agent::default()).await;
        let result = call(&client, tool, json!({})).await;
        let answer = (result.is_error != Some(true), text(&result));
        client.cancel().await.unwrap();
        answer
    })
}

fn start(env: &Env) -> Controller {
    env.start(&[
        "--auth-recheck-ms",
        "1000",
        "--metrics-listen",
        "127.0.0.1:0",
    ])
}

#[test]
fn a_sign_in_refreshes_with_rotation_and_a_revoked_one_asks_for_a_sign_in_once() {
    let env = Env::new();
    // Access tokens live 20 s, refreshed in their last 2 (a tenth): room
    // for the sign-in and the first call on a loaded machine.
    let oidc = Oidc::start(&env, 20);
    env.user_mcp_servers(&[("oidc", json!({"httpUrl": oidc.mcp}))]);
    let c = start(&env);
    let s = c.wait_for("oidc needs a sign-in", |s| auth_required(s, "oidc"));
    let message = mcp(&s, "oidc").unwrap().status.message.clone().unwrap();
    assert!(
        message.ends_with("sign in with `steward auth login oidc`"),
        "{message}"
    );

    let (ok, out, err) = login(&env, &["oidc"], &browser("alice"));
    assert!(ok, "{out}{err}");
    assert!(
        out.starts_with(&format!(
            "signed in to oidc at {} (scopes: mcp:read; expires in",
            oidc.issuer
        )),
        "{out}"
    );
    assert!(out.contains("refreshable"), "{out}");
    assert!(
        out.contains("controller "),
        "the controller was told: {out}"
    );
    c.wait_for("oidc Ready after the sign-in", |s| ready(s, "oidc"));
    assert_eq!(whoami(&env, "oidc__whoami"), (true, "alice".to_owned()));
    assert_eq!(events(&env, "oidc", "SignedIn"), 1);

    // Shortly before it expires the token is refreshed, and rotated.
    let first = stored_tokens(&env).remove(0);
    let expires = first["expiresAt"].as_u64().unwrap();
    wait_until("the access token is in its last two seconds", || {
        now() + 2 >= expires
    });
    assert_eq!(whoami(&env, "oidc__whoami"), (true, "alice".to_owned()));
    let second = stored_tokens(&env).remove(0);
    assert_ne!(second["accessToken"], first["accessToken"], "not refreshed");
    assert_ne!(second["refreshToken"], first["refreshToken"], "not rotated");
    assert_eq!(oidc.refreshes(), [true]);

    // The user revokes the grant at the authorization server.
    oidc.revoke(&second);
    // Once the access token expires, the refresh is refused: the call
    // that meets it says it did not run and how to sign in, and the server
    // needs a sign-in.
    let expires = second["expiresAt"].as_u64().unwrap();
    wait_until("the access token expired", || now() >= expires);
    let (ok, answer) = whoami(&env, "oidc__whoami");
    assert!(!ok, "{answer}");
    assert!(
        answer.contains("did not run this call") && answer.contains("steward auth login oidc"),
        "{answer}"
    );
    c.wait_for("oidc AuthRequired", |s| auth_required(s, "oidc"));
    let asked = events(&env, "oidc", "AuthRequired");
    assert!(asked >= 2, "before the first sign-in and now: {asked}");
    // A call now says what to do.
    let (ok, answer) = whoami(&env, "oidc__whoami");
    assert!(!ok, "{answer}");
    assert!(answer.contains("steward auth login oidc"), "{answer}");
    // The stores are looked at every second meanwhile: never another
    // refresh, nor a new registration, and the credentials stay.
    let rechecks = |c: &Controller| {
        c.log_text()
            .matches("looked in the token stores for servers waiting for a sign-in")
            .count()
    };
    wait_until("three looks later", || rechecks(&c) >= 3);
    assert_eq!(oidc.refreshes(), [true, false], "a refresh loop");
    assert_eq!(events(&env, "oidc", "TokenRefreshFailed"), 1);
    assert_eq!(events(&env, "oidc", "AuthRequired"), asked, "asked again");
    let kept = stored_tokens(&env);
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0]["refreshToken"], second["refreshToken"]);
    let registrations = |env: &Env| {
        let path = env.home.join("steward").join("oauth.json");
        let text = std::fs::read_to_string(path).unwrap();
        text.matches("\"client ").count()
    };
    assert_eq!(registrations(&env), 1);
    let addr = metrics_addr(&|| c.log_text());
    let (_, _, metrics) = http_get(&addr, "/metrics", &[]);
    for line in [
        "steward_oauth_refresh_total{server=\"oidc\",result=\"success\"} 1",
        "steward_oauth_refresh_total{server=\"oidc\",result=\"rejected\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }

    // Signing in again: the same registration, Ready again.
    let (ok, out, err) = login(&env, &["oidc"], &browser("alice"));
    assert!(ok, "{out}{err}");
    c.wait_for("oidc Ready again", |s| ready(s, "oidc"));
    assert_eq!(whoami(&env, "oidc__whoami"), (true, "alice".to_owned()));
    assert_eq!(registrations(&env), 1, "registered twice");
    assert!(
        !c.log_text()
            .contains(second["accessToken"].as_str().unwrap())
    );
}

/// A form POST over a plain socket (the revocation endpoint); its status.
fn post_form(url: &str, form: &[(&str, &str)]) -> u16 {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let url = url.strip_prefix("http://").unwrap();
    let (host, path) = url.split_once('/').unwrap();
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    write!(
        stream,
        "POST /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

#[test]
fn the_device_flow_signs_in_with_a_code_entered_elsewhere() {
    let env = Env::new();
    let oidc = Oidc::start(&env, 3600);
    let c = waiting_for_sign_in(&env, json!({"httpUrl": oidc.mcp}));
    let stderr = env.root.path().join("device.stderr");
    let mut signing = Reaped(
        env.command(&["auth", "login", "oidc", "--device"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap(),
    );
    let shown = || std::fs::read_to_string(&stderr).unwrap_or_default();
    wait_until("the code is shown", || shown().contains("enter the code"));
    let text = shown();
    let url = text
        .split_whitespace()
        .skip_while(|w| *w != "open")
        .nth(1)
        .unwrap()
        .to_owned();
    assert!(
        url.starts_with(&format!("{}/device", oidc.issuer)),
        "{text}"
    );
    // The user, on another device, enters it and approves as bob.
    let (node, _) = conformance_suite();
    let approved = Command::new(node)
        .arg(script("oidc_browser.mjs"))
        .arg(&url)
        .env("OIDC_ACCOUNT", "bob")
        .status()
        .unwrap();
    assert!(approved.success());
    let mut stdout = String::new();
    use std::io::Read as _;
    signing
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let status = signing.0.wait().unwrap();
    assert!(status.success(), "{stdout}{}", shown());
    assert!(stdout.starts_with("signed in to oidc at "), "{stdout}");
    c.wait_for("oidc Ready", |s| ready(s, "oidc"));
    assert_eq!(whoami(&env, "oidc__whoami"), (true, "bob".to_owned()));
    let grants: Vec<String> = oidc.token_requests().into_iter().map(|(g, _)| g).collect();
    assert!(
        grants.contains(&"urn:ietf:params:oauth:grant-type:device_code".to_owned()),
        "{grants:?}"
    );
}

#[test]
fn two_accounts_of_one_issuer_coexist_and_each_entry_uses_its_own() {
    let env = Env::new();
    let oidc = Oidc::start(&env, 3600);
    env.user_mcp_servers(&[
        (
            "work",
            json!({"httpUrl": oidc.mcp, "oauth": {"account": "work"}}),
        ),
        (
            "home",
            json!({"httpUrl": oidc.mcp, "oauth": {"account": "home"}}),
        ),
    ]);
    let c = start(&env);
    c.wait_for("both need a sign-in", |s| {
        auth_required(s, "work") && auth_required(s, "home")
    });
    let (ok, out, err) = login(&env, &["work"], &browser("alice"));
    assert!(ok, "{out}{err}");
    assert!(out.contains(" as account work "), "{out}");
    let s = c.wait_for("work Ready", |s| ready(s, "work"));
    assert!(auth_required(&s, "home"), "home used work's account");
    let (ok, out, err) = login(&env, &["home"], &browser("bob"));
    assert!(ok, "{out}{err}");
    c.wait_for("home Ready", |s| ready(s, "home"));
    assert_eq!(whoami(&env, "work__whoami"), (true, "alice".to_owned()));
    assert_eq!(whoami(&env, "home__whoami"), (true, "bob".to_owned()));

    let status = env.steward(&["auth", "status", "-o", "json"]);
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    let rows = status["items"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        assert_eq!(row["state"], "SignedIn", "{row}");
        assert_eq!(row["issuer"], oidc.issuer.as_str());
        assert_eq!(row["account"], row["name"]);
        assert_eq!(row["scopes"], json!(["mcp:read"]));
        assert!(row["expiresAt"].is_string(), "{row}");
        assert!(
            row["keptIn"].as_str().unwrap().ends_with("oauth.json"),
            "{row}"
        );
    }
    let table = env.steward(&["auth", "status"]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.starts_with("NAME"), "{table}");
    for token in stored_tokens(&env) {
        assert!(
            !status
                .to_string()
                .contains(token["accessToken"].as_str().unwrap())
        );
        assert!(!table.contains(token["accessToken"].as_str().unwrap()));
    }

    // Signing out of one account leaves the other.
    let out = env.steward(&["auth", "logout", "work"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = c.wait_for("work needs a sign-in again", |s| auth_required(s, "work"));
    assert!(ready(&s, "home"));
    assert_eq!(whoami(&env, "home__whoami"), (true, "bob".to_owned()));
}

/// What a child writes to `pipe`, gathered as it comes.
fn gather(
    mut pipe: impl std::io::Read + Send + 'static,
) -> std::sync::Arc<std::sync::Mutex<String>> {
    let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let into = text.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    text
}

#[test]
fn paste_signs_in_from_a_terminal_with_the_address_the_browser_was_sent_to() {
    let env = Env::new();
    let oidc = Oidc::start(&env, 3600);
    let c = waiting_for_sign_in(&env, json!({"httpUrl": oidc.mcp}));
    // A user who never pastes: the command ends at its --timeout.
    let mut idle = Reaped(
        env.command(&["auth", "login", "oidc", "--paste", "--timeout", "1s"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run steward auth login --paste"),
    );
    let _open = idle.0.stdin.take();
    let told = gather(idle.0.stderr.take().unwrap());
    let ended = idle.0.wait().unwrap();
    assert!(!ended.success());
    wait_until("the timeout is said", || {
        told.lock()
            .unwrap()
            .contains("nothing was pasted within 1s (--timeout)")
    });
    // `script` (util-linux, in every Debian) gives the command a terminal,
    // as over SSH; what the test writes to it is what the user types.
    let line = format!(
        "{} --workspace {} auth login oidc --paste",
        bin("steward").display(),
        env.ws.display()
    );
    let mut signing = Reaped(
        Command::new("script")
            .args(["-qefc", &line, "/dev/null"])
            .env_clear()
            .envs(env.steward_env())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run script (util-linux)"),
    );
    let shown = gather(signing.0.stdout.take().unwrap());
    let _errors = gather(signing.0.stderr.take().unwrap());
    let screen = || shown.lock().unwrap().clone();
    // The prompt is only shown on a terminal.
    wait_until("the URL and the prompt are shown", || {
        screen().contains("redirected address: ")
    });
    let url = screen()
        .split_whitespace()
        .find(|w| w.starts_with(&oidc.issuer) && w.contains("code_challenge="))
        .unwrap_or_else(|| panic!("no authorization URL in {}", screen()))
        .to_owned();
    // Where the browser will be sent: the loopback callback.
    let redirect = screen()
        .split_whitespace()
        .skip_while(|w| *w != "goes")
        .nth(2)
        .unwrap_or_else(|| panic!("no redirect URI in {}", screen()))
        .to_owned();
    assert!(redirect.starts_with("http://127.0.0.1:"), "{redirect}");
    // The user approves in a browser elsewhere, which stops at the
    // loopback address (nothing listens there) and shows it.
    let (node, _) = conformance_suite();
    let browsed = Command::new(node)
        .arg(script("oidc_browser.mjs"))
        .arg(&url)
        .env("OIDC_ACCOUNT", "carol")
        .env("OIDC_STOP_AT", &redirect)
        .output()
        .unwrap();
    assert!(
        browsed.status.success(),
        "{}",
        String::from_utf8_lossy(&browsed.stderr)
    );
    let address = String::from_utf8_lossy(&browsed.stdout).trim().to_owned();
    assert!(address.contains("code="), "{address}");
    // Pasted, with a slip of the mouse: a blank line first.
    use std::io::Write as _;
    let mut stdin = signing.0.stdin.take().unwrap();
    write!(stdin, "\n{address}\n").unwrap();
    stdin.flush().unwrap();
    let status = signing.0.wait().unwrap();
    drop(stdin);
    assert!(status.success(), "{}", screen());
    wait_until("the outcome is shown", || {
        screen().contains("signed in to oidc at ")
    });
    c.wait_for("oidc Ready", |s| ready(s, "oidc"));
    assert_eq!(whoami(&env, "oidc__whoami"), (true, "carol".to_owned()));
}

#[test]
fn tokens_and_the_client_secret_show_nowhere_but_the_stores() {
    let env = Env::new();
    const CLIENT_SECRET: &str = "cs-4b1d9e77-known-client-secret";
    // A client registered by hand, on a redirect URI the entry pins: a
    // free port above the ephemeral range (as Steward's own are), which no
    // other test's connection can take meanwhile.
    let start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let port = (0..4000u32)
        .map(|i| 61000 + ((start + i) % 4000) as u16)
        .find(|port| std::net::TcpListener::bind(("127.0.0.1", *port)).is_ok())
        .expect("a free port above 61000");
    let redirect = format!("http://127.0.0.1:{port}/callback");
    let oidc = Oidc::start_with(
        &env,
        3600,
        &[
            ("STATIC_CLIENT_SECRET", CLIENT_SECRET),
            ("STATIC_REDIRECT", &redirect),
        ],
    );
    let set = set_secret(&env, "oidc-client", CLIENT_SECRET);
    assert_eq!(set.code, 0, "{}", set.stderr);
    env.user_mcp_servers(&[(
        "oidc",
        json!({"httpUrl": oidc.mcp, "oauth": {
            "clientId": "steward-static",
            "clientSecret": "${secret:oidc-client}",
            "redirectUri": redirect,
        }}),
    )]);
    let (otlp, spans) = otlp_receiver();
    let log = env.root.path().join("controller.log");
    let c = env.start_logging_to(
        &["--metrics-listen", "127.0.0.1:0"],
        std::fs::File::create(&log).unwrap().into(),
        &[
            ("RUST_LOG", "trace"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp),
        ],
        log.clone(),
    );
    c.wait_for("oidc needs a sign-in", |s| auth_required(s, "oidc"));
    // Its output is checked for leaks below.
    let (ok, out, err) = login(&env, &["oidc"], &browser("alice"));
    assert!(ok, "{out}{err}");
    c.wait_for("oidc Ready", |s| ready(s, "oidc"));
    assert_eq!(whoami(&env, "oidc__whoami"), (true, "alice".to_owned()));
    let token = stored_tokens(&env).remove(0);
    assert_eq!(token["clientId"], "steward-static");
    let values = [
        token["accessToken"].as_str().unwrap().to_owned(),
        token["refreshToken"].as_str().unwrap().to_owned(),
        CLIENT_SECRET.to_owned(),
    ];
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    assert_absent("steward auth login", &format!("{out}{err}"), &values);

    for args in [
        &["status", "-o", "json"][..],
        &["status", "-o", "yaml", "--show-secrets"],
        &["status", "-o", "wide"],
        &["describe", "oidc"],
        &["events", "-o", "json"],
        &["auth", "status", "-o", "json"],
        &["auth", "status"],
        &["secret", "list", "-o", "json"],
        &["export", "--format", "toolhive"],
    ] {
        let out = env.steward(args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_absent(&format!("steward {args:?}"), &text, &values);
    }
    assert_absent("the metrics", &scrape(&c.log_text()), &values);
    wait_until("spans exported", || !spans.lock().unwrap().is_empty());
    let sent = String::from_utf8_lossy(&spans.lock().unwrap()).into_owned();
    assert_absent("the OTLP spans", &sent, &values);
    assert_absent(
        "the controller's environment",
        &environ(c.pid()).join("\n"),
        &values,
    );
    drop(c);
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(log_text.contains("TRACE"), "the log runs at trace level");
    assert_absent("the controller's log at trace", &log_text, &values);
    // The two stores hold them; no other file Steward writes does.
    let steward = env.home.join("steward");
    let oauth_store = steward.join("oauth.json");
    let secret_store = steward.join("secrets.json");
    let stored = std::fs::read_to_string(&oauth_store).unwrap();
    assert!(stored.contains(values[0]) && stored.contains(values[1]));
    assert!(
        std::fs::read_to_string(&secret_store)
            .unwrap()
            .contains(CLIENT_SECRET)
    );
    for (path, text) in files_under(&env.home, &oauth_store) {
        if path != secret_store {
            assert_absent(&path.display().to_string(), &text, &values);
        }
    }
}

/// The provider (access tokens living `ttl` s), the workspace's `oidc`
/// entry, a controller, and alice signed in with `auth login`: oidc Ready.
fn alice_signed_in(env: &Env, ttl: u64) -> (Oidc, Controller) {
    let oidc = Oidc::start(env, ttl);
    let c = waiting_for_sign_in(env, json!({"httpUrl": oidc.mcp}));
    alice_signs_in(env, &c);
    (oidc, c)
}

/// A controller whose one server, `oidc`, is `entry`, waiting for a
/// sign-in.
fn waiting_for_sign_in(env: &Env, entry: Value) -> Controller {
    env.user_mcp_servers(&[("oidc", entry)]);
    let c = start(env);
    c.wait_for("oidc needs a sign-in", |s| auth_required(s, "oidc"));
    c
}

/// alice signs in (`auth login` with a browser that approves as her), and
/// `oidc` is Ready.
fn alice_signs_in(env: &Env, c: &Controller) {
    let (ok, out, err) = login(env, &["oidc"], &browser("alice"));
    assert!(ok, "{out}{err}");
    c.wait_for("oidc Ready", |s| ready(s, "oidc"));
}

/// An agent that declares URL-mode elicitation: asked to open a page, the
/// user (`browser`, approving) opens it while the agent accepts.
#[derive(Clone)]
struct PageOpener {
    browser: String,
    asked: Arc<Mutex<Vec<Value>>>,
    completed: Arc<Mutex<Vec<String>>>,
}

impl PageOpener {
    /// An agent whose user signs in as `account` and approves.
    fn signing_in_as(account: &str) -> PageOpener {
        PageOpener {
            browser: browser(account),
            asked: Arc::default(),
            completed: Arc::default(),
        }
    }

    /// Calls `oidc__whoami` as this agent: whether it succeeded, its text.
    fn whoami(&self, env: &Env) -> (bool, String) {
        self.call(env, "oidc__whoami")
    }

    /// Calls `tool` as this agent: whether it succeeded, its text.
    fn call(&self, env: &Env, tool: &'static str) -> (bool, String) {
        runtime().block_on(async {
            let stream = tokio::net::UnixStream::connect(env.paths().mcp_socket_path())
                .await
                .unwrap();
            let client = self.clone().serve(stream.into_split()).await.unwrap();
            let result = client
                .call_tool(CallToolRequestParams::new(tool))
                .await
                .unwrap_or_else(|e| panic!("call {tool}: {e}"));
            client.cancel().await.unwrap();
            (result.is_error != Some(true), text(&result))
        })
    }
}

impl ClientHandler for PageOpener {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let asked = serde_json::to_value(&request).unwrap();
        self.asked.lock().unwrap().push(asked.clone());
        let url = asked["url"].as_str().unwrap_or_default().to_owned();
        let browser = self.browser.clone();
        // The user opens the page; the agent answers at once.
        std::thread::spawn(move || {
            let _ = Command::new("sh")
                .arg("-c")
                .arg(format!("{browser} \"$1\""))
                .arg("sh")
                .arg(url)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .status();
        });
        Ok(ElicitResult::new(ElicitationAction::Accept))
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method == "notifications/elicitation/complete" {
            let id = notification
                .params
                .as_ref()
                .and_then(|p| p["elicitationId"].as_str())
                .unwrap_or_default()
                .to_owned();
            self.completed.lock().unwrap().push(id);
        }
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation =
            Some(ElicitationCapability::new().with_url(UrlElicitationCapability::default()));
        ClientConfig::new(capabilities, Implementation::new("page-opener", "1.0"))
    }
}

#[test]
fn an_agent_that_opens_pages_signs_the_user_in_and_the_call_goes_on() {
    let env = Env::new();
    let oidc = Oidc::start(&env, 3600);
    let c = waiting_for_sign_in(&env, json!({"httpUrl": oidc.mcp}));
    // Signed in once (its tools are known), then out: it waits again.
    alice_signs_in(&env, &c);
    let out = env.steward(&["auth", "logout", "oidc"]);
    assert!(out.status.success(), "{out:?}");
    c.wait_for("oidc needs a sign-in again", |s| auth_required(s, "oidc"));

    // An agent that cannot open a page is told the command.
    let (ok, answer) = whoami(&env, "oidc__whoami");
    assert!(
        !ok && answer.contains("steward auth login oidc"),
        "{answer}"
    );

    // One that can is asked to open the authorization page; the user
    // signs in there (as bob), and the same call completes.
    let agent = PageOpener::signing_in_as("bob");
    let (ok, answer) = agent.whoami(&env);
    assert!(ok, "{answer}");
    assert_eq!(answer, "bob");
    let asked = agent.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["mode"], "url", "{asked:?}");
    let url = asked[0]["url"].as_str().unwrap();
    assert!(url.starts_with(&oidc.issuer), "{url}");
    assert!(url.contains("code_challenge_method=S256"), "{url}");
    let id = asked[0]["elicitationId"].as_str().unwrap().to_owned();
    wait_until("the agent is told the sign-in completed", || {
        agent.completed.lock().unwrap().contains(&id)
    });
    c.wait_for("oidc Ready again", |s| ready(s, "oidc"));
    assert_eq!(whoami(&env, "oidc__whoami"), (true, "bob".to_owned()));
    assert_eq!(stored_tokens(&env).len(), 1);
}

#[test]
fn with_a_secret_service_on_the_session_bus_tokens_are_kept_in_the_keyring() {
    let env = Env::new();
    let keyring = Keyring::start(&env);
    env.set_var("DBUS_SESSION_BUS_ADDRESS", &keyring.address);
    let oidc = Oidc::start(&env, 3600);
    let c = waiting_for_sign_in(&env, json!({"httpUrl": oidc.mcp}));
    let (ok, out, err) = login(&env, &["oidc"], &browser("alice"));
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("kept in the Secret Service (the desktop keyring)"),
        "{out}"
    );
    c.wait_for("oidc Ready after the sign-in", |s| ready(s, "oidc"));
    assert_eq!(whoami(&env, "oidc__whoami"), (true, "alice".to_owned()));
    // The token is an item of the keyring, and in no file of Steward's.
    let found = keyring.secret_tool(&["search", "--all", "service", "steward-oauth"], None);
    let items = String::from_utf8_lossy(&found.stdout).into_owned()
        + &String::from_utf8_lossy(&found.stderr);
    assert!(
        items.contains("accessToken"),
        "no token item in the keyring: {items}"
    );
    assert!(!env.home.join("steward").join("oauth.json").exists());
    let status = env.steward(&["auth", "status", "-o", "json"]);
    let listed = String::from_utf8_lossy(&status.stdout);
    assert!(listed.contains("\"keptIn\": \"keyring\""), "{listed}");
    assert!(!listed.contains("accessToken"), "{listed}");
}

#[test]
fn a_call_refused_mid_session_signs_in_through_the_agent_and_goes_on() {
    let env = Env::new();
    // Access tokens live 8 s: the grant is revoked meanwhile, and the first
    // call after they expire meets the refused refresh.
    let (oidc, _c) = alice_signed_in(&env, 8);
    let first = stored_tokens(&env).remove(0);
    oidc.revoke(&first);
    let expires = first["expiresAt"].as_u64().unwrap();
    wait_until("the access token expired", || now() >= expires);

    // The call meets the refused refresh: not run; the agent is asked to
    // open the page, the user signs in (as bob), and the call goes on.
    let agent = PageOpener::signing_in_as("bob");
    let (ok, answer) = agent.whoami(&env);
    assert!(ok, "{answer}");
    assert_eq!(answer, "bob");
    assert_eq!(agent.asked.lock().unwrap().len(), 1);
    assert_eq!(oidc.refreshes(), [false], "one refused refresh, no loop");
}

/// The runs of tools the MCP server recorded: `(tool, scope)`.
fn runs(oidc: &Oidc) -> Vec<(String, String)> {
    std::fs::read_to_string(oidc.state.join("runs.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|r| {
            (
                r["tool"].as_str().unwrap().to_owned(),
                r["scope"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn scopes_of(record: &Value) -> Vec<String> {
    record["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_call_that_needs_more_scope_steps_up_through_the_agent_and_runs_once() {
    steps_up_through_the_agent(|oidc| json!({"httpUrl": oidc.mcp}));
}

#[test]
fn a_legacy_sse_call_that_needs_more_scope_steps_up_through_the_agent_too() {
    steps_up_through_the_agent(|oidc| json!({"url": format!("{}/sse", oidc.mcp)}));
}

/// A call refused with 403 `insufficient_scope` mid-session, on the
/// server's entry `entry` (streamable HTTP or legacy HTTP+SSE).
fn steps_up_through_the_agent(entry: impl Fn(&Oidc) -> Value) {
    let env = Env::new();
    // `admin` needs `mcp:admin` besides `mcp:read`; the server's 403 names
    // `mcp:admin` alone, and refuses any request whose token lacks
    // `mcp:read`: only a step-up to the union lets the call go on.
    let oidc = Oidc::start_with(
        &env,
        3600,
        &[("STEP_UP_TOOL", "admin"), ("STEP_UP_SCOPE", "mcp:admin")],
    );
    let c = waiting_for_sign_in(&env, entry(&oidc));
    alice_signs_in(&env, &c);
    let first = scopes_of(&stored_tokens(&env)[0]);
    assert!(
        first.contains(&"mcp:read".to_owned()) && !first.contains(&"mcp:admin".to_owned()),
        "{first:?}"
    );

    // The call is refused with 403 before it runs; the agent is asked once
    // to open the page, alice approves the wider grant, and the same call
    // goes on — with a token of both scopes — and runs once.
    let agent = PageOpener::signing_in_as("alice");
    let (ok, answer) = agent.call(&env, "oidc__admin");
    assert!(ok, "{answer}");
    let mut words = answer.split_whitespace();
    assert_eq!(words.next(), Some("alice"), "{answer}");
    let used: Vec<&str> = words.collect();
    assert!(
        used.contains(&"mcp:read") && used.contains(&"mcp:admin"),
        "the call ran with {used:?}"
    );
    let asked = agent.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let url = asked[0]["url"].as_str().unwrap();
    let scope = url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "scope")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let scope: Vec<&str> = scope.split(' ').collect();
    assert!(
        scope.contains(&"mcp:read") && scope.contains(&"mcp:admin"),
        "asked for {scope:?}"
    );
    let admin_runs: Vec<_> = runs(&oidc)
        .into_iter()
        .filter(|(tool, _)| tool == "admin")
        .collect();
    assert_eq!(admin_runs.len(), 1, "{admin_runs:?}");
    assert!(admin_runs[0].1.contains("mcp:admin"), "{admin_runs:?}");

    // One token kept, for both scopes; nothing more wanted; the first
    // grant's tools still work with it.
    let stored = stored_tokens(&env);
    assert_eq!(stored.len(), 1, "{stored:?}");
    let scopes = scopes_of(&stored[0]);
    assert!(
        scopes.contains(&"mcp:read".to_owned()) && scopes.contains(&"mcp:admin".to_owned()),
        "{scopes:?}"
    );
    assert!(stored[0].get("wantedScopes").is_none(), "{:?}", stored[0]);
    assert_eq!(whoami(&env, "oidc__whoami"), (true, "alice".to_owned()));
    // The wider grant serves the next call without asking anyone.
    let (ok, answer) = whoami(&env, "oidc__admin");
    assert!(ok, "{answer}");
}

#[test]
fn a_legacy_sse_call_refused_mid_session_says_it_did_not_run() {
    let env = Env::new();
    // A `url` (HTTP+SSE) entry; access tokens live 8 s.
    let oidc = Oidc::start(&env, 8);
    let c = waiting_for_sign_in(&env, json!({"url": format!("{}/sse", oidc.mcp)}));
    alice_signs_in(&env, &c);
    assert_eq!(whoami(&env, "oidc__whoami"), (true, "alice".to_owned()));
    let ran = || runs(&oidc).len();
    assert_eq!(ran(), 1);

    // The token endpoint is down when the token expires: the call is
    // refused before it runs, and says so, without asking for a sign-in.
    let down = oidc.state.join("token-down");
    std::fs::write(&down, "").unwrap();
    let expires = stored_tokens(&env)[0]["expiresAt"].as_u64().unwrap();
    wait_until("the access token expired", || now() >= expires);
    let (ok, answer) = whoami(&env, "oidc__whoami");
    assert!(!ok, "{answer}");
    assert!(
        answer.starts_with("server \"oidc\" did not run this call")
            && answer.contains("could not be refreshed for now")
            && !answer.contains("auth login"),
        "{answer}"
    );
    assert_eq!(ran(), 1, "the refused call did not run");

    // Back up: refreshed, Ready again without a sign-in.
    std::fs::remove_file(&down).unwrap();
    c.wait_for("oidc Ready again without a sign-in", |s| ready(s, "oidc"));
    assert_eq!(whoami(&env, "oidc__whoami"), (true, "alice".to_owned()));
    assert_eq!(ran(), 2);

    // The grant is revoked and the token expires: the refresh is refused,
    // the call did not run, and the answer names the command.
    let current = stored_tokens(&env).remove(0);
    oidc.revoke(&current);
    let expires = current["expiresAt"].as_u64().unwrap();
    wait_until("the access token expired", || now() >= expires);
    let (ok, answer) = whoami(&env, "oidc__whoami");
    assert!(!ok, "{answer}");
    assert!(
        answer.starts_with("server \"oidc\" did not run this call")
            && answer.contains("`steward auth login oidc`"),
        "{answer}"
    );
    assert_eq!(ran(), 2, "the refused call did not run");
    assert_eq!(
        oidc.refreshes().last(),
        Some(&false),
        "{:?}",
        oidc.token_requests()
    );
}

#[test]
fn a_refresh_that_fails_for_a_while_is_tried_again_and_needs_no_sign_in() {
    let env = Env::new();
    let (oidc, c) = alice_signed_in(&env, 8);
    // The authorization server's token endpoint goes down (503) and the
    // access token expires: the refresh fails, for now.
    let down = oidc.state.join("token-down");
    std::fs::write(&down, "").unwrap();
    let first = stored_tokens(&env).remove(0);
    let expires = first["expiresAt"].as_u64().unwrap();
    wait_until("the access token expired", || now() >= expires);
    let (ok, answer) = whoami(&env, "oidc__whoami");
    assert!(!ok, "{answer}");
    wait_until("the failed refresh is an event", || {
        events(&env, "oidc", "TokenRefreshFailed") >= 1
    });
    let unavailable = || {
        std::fs::read_to_string(oidc.state.join("tokens.jsonl"))
            .unwrap_or_default()
            .matches("\"unavailable\":true")
            .count()
    };
    assert!(unavailable() >= 1);
    // The call did not run, and nobody is told to sign in: it is tried again.
    assert!(
        answer.contains("did not run this call")
            && answer.contains("could not be refreshed for now")
            && !answer.contains("auth login"),
        "{answer}"
    );
    let s = c.wait_for("oidc retried, not waiting for a sign-in", |s| {
        mcp(s, "oidc").is_some_and(|m| m.status.reason == Some(Reason::StartFailed))
    });
    let message = mcp(&s, "oidc")
        .unwrap()
        .status
        .message
        .clone()
        .unwrap_or_default();
    assert!(message.contains("HTTP 503"), "{message}");
    // Back up: the server is connected again with the refresh token — no
    // sign-in, the same account, and the grant was not thrown away.
    std::fs::remove_file(&down).unwrap();
    c.wait_for("oidc Ready again without a sign-in", |s| ready(s, "oidc"));
    assert_eq!(whoami(&env, "oidc__whoami"), (true, "alice".to_owned()));
    assert!(
        oidc.refreshes().contains(&true),
        "{:?}",
        oidc.token_requests()
    );
    assert_eq!(events(&env, "oidc", "SignedIn"), 1, "signed in again");
}

#[test]
fn the_pypi_mcp_client_signs_the_user_in_through_url_elicitation() {
    a_real_sdk_client_signs_the_user_in_through_url_elicitation(Sdk::PyPi2);
}

#[test]
fn the_typescript_sdk_client_signs_the_user_in_through_url_elicitation() {
    a_real_sdk_client_signs_the_user_in_through_url_elicitation(Sdk::TypeScript);
}

/// A real agent SDK's client (which declares URL-mode elicitation when
/// given a way to open pages) through `steward mcp`, as an agent runs it,
/// while the server waits for a sign-in: its user opens the page and signs
/// in as carol, and the call goes on.
fn a_real_sdk_client_signs_the_user_in_through_url_elicitation(sdk: Sdk) {
    let env = Env::new();
    let (_oidc, c) = alice_signed_in(&env, 3600);
    let out = env.steward(&["auth", "logout", "oidc"]);
    assert!(out.status.success(), "{out:?}");
    c.wait_for("oidc needs a sign-in again", |s| auth_required(s, "oidc"));
    let open_pages = format!("--open-pages={}", browser("carol"));
    let mut target = vec!["stdio".to_owned()];
    target.extend(steward_mcp_argv(&env));
    let mut agent = match sdk {
        Sdk::TypeScript => PyClient::of(sdk, &env, &[&open_pages], &target),
        _ => PyClient::stdio_with(&env, &[&open_pages], &steward_mcp_argv(&env)),
    };
    let (result, _) = agent.call("oidc__whoami", json!({}));
    // (The TypeScript SDK leaves out an `isError` that is false.)
    assert_ne!(result["isError"], true, "{sdk:?}: {result}");
    assert_eq!(result["content"][0]["text"], "carol", "{sdk:?}: {result}");
    c.wait_for("oidc Ready as carol", |s| ready(s, "oidc"));
}

//! `steward export --format toolhive`: representative workspaces exported
//! by the real binary, every document validated against ToolHive v0.44.0's
//! CRDs (the copies in `controller/assets/toolhive/`) with the `jsonschema`
//! crate; the same validator accepts ToolHive's own six examples and
//! rejects a broken copy; each refusal gives its message and exit 1 while
//! the other servers are still written; no secret value, header value or
//! token ever appears; snapshots of the YAML.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::{Value, json};
use steward::export::check::{Crds, Report};
use steward_tests::harness::{Env, Run, fake_tools, mcp_servers, ready, run_with_input};

use crate::common;

/// ToolHive v0.44.0's files as the repository carries them.
fn toolhive_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../controller/assets/toolhive/v0.44.0")
}

/// The CRDs' structural schemas, compiled once for every test.
fn crds() -> &'static Crds {
    static CRDS: OnceLock<Crds> = OnceLock::new();
    CRDS.get_or_init(|| Crds::load(&toolhive_dir().join("crds")).expect("the CRDs load"))
}

/// Every secret value the fixtures hold, expanded from a variable or
/// written literally: none may appear in any output.
const SECRETS: &[&str] = &[
    "at-of-this-machine",
    "rt-of-this-machine",
    "dcr-secret-of-this-machine",
    "dcr-client-of-this-machine",
    "cs-in-keyring",
    "ghp-expanded-secret",
    "tok-expanded-secret",
    "sk-literal-env",
    "sk-literal-header",
    "sk-literal-bearer",
    "tenant-literal-value",
    "pw-in-env-url",
];

fn assert_no_secret(what: &str, run: &Run) {
    for secret in SECRETS {
        assert!(
            !run.stdout.contains(secret) && !run.stderr.contains(secret),
            "{what} shows {secret}:\n{}\n{}",
            run.stdout,
            run.stderr
        );
    }
}

/// `text` checked against the CRDs: no problem, and every document of a
/// kind the CRDs define (or a core Secret).
fn assert_valid(what: &str, text: &str) -> Report {
    let report = crds()
        .check(text, Path::new(what))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let problems: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
    assert!(problems.is_empty(), "{what}:\n{}", problems.join("\n"));
    assert!(
        report.unchecked.is_empty(),
        "{what}: unchecked {:?}",
        report.unchecked
    );
    assert!(report.documents > 0, "{what}: no document");
    report
}

/// The documents of a manifest, parsed.
fn documents(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    yaml_serde::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

/// The document of `kind` named `name`.
fn doc<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name} in {docs:#?}"))
}

fn export(sb: &Env, args: &[&str]) -> Run {
    let mut all = vec!["export", "--format", "toolhive"];
    all.extend_from_slice(args);
    sb.run(&all)
}

/// A workspace with one server of every mapping: a `docker run` with a
/// passed-through token and an include filter, an `npx` and a `uvx`
/// package (images given on the command line), a streamable-HTTP server
/// with a bearer token and an API-key header, Claude's `type: http`, an
/// SSE server with a literal header; secrets expanded from variables and
/// written literally.
fn representative() -> Env {
    let sb = Env::new();
    sb.set_var("GH_TOKEN", "ghp-expanded-secret");
    sb.set_var("REMOTE_TOKEN", "tok-expanded-secret");
    sb.write_home(
        "settings.json",
        &mcp_servers(&[
            (
                "github",
                json!({
                    "command": "docker",
                    "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN",
                             "-e", "GITHUB_TOOLSETS=repos,issues", "--network", "host",
                             "ghcr.io/github/github-mcp-server:v0.20.0", "stdio"],
                    "env": { "GITHUB_PERSONAL_ACCESS_TOKEN": "${GH_TOKEN}" },
                    "includeTools": ["get_issue", "list_issues", "create_issue"],
                    "excludeTools": ["create_issue"],
                    "timeout": 45000
                }),
            ),
            (
                "everything",
                json!({
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-everything@2026.8.31", "stdio"],
                    "env": { "MODE": "fast", "API_KEY": "sk-literal-env",
                             "DATABASE_URL": "postgres://app:pw-in-env-url@db/app" },
                    "trust": true,
                    "cwd": "/srv/everything"
                }),
            ),
            (
                "time",
                json!({
                    "command": "uvx",
                    "args": ["mcp-server-time==2026.10.19", "--local-timezone=UTC"],
                    "timeout": 1500
                }),
            ),
            (
                "remote",
                json!({
                    "httpUrl": "https://mcp.example.com/mcp",
                    "headers": { "Authorization": "Bearer ${REMOTE_TOKEN}",
                                 "X-Api-Key": "sk-literal-header" }
                }),
            ),
            (
                "claude",
                json!({
                    "type": "http",
                    "url": "https://claude-style.example.com/mcp",
                    "headers": { "Authorization": "Bearer sk-literal-bearer" },
                    "includeTools": ["search"]
                }),
            ),
            (
                "events",
                json!({
                    "url": "https://sse.example.com/sse",
                    "headers": { "X-Tenant": "tenant-literal-value" }
                }),
            ),
        ]),
    );
    sb
}

const IMAGES: &[&str] = &[
    "--image",
    "everything=ghcr.io/acme/server-everything:2026.8.31",
    "--image",
    "time=ghcr.io/acme/mcp-server-time:2026.10.19",
];

#[test]
fn representative_workspace_exports_valid_resources() {
    let sb = representative();
    let mut args = IMAGES.to_vec();
    args.extend(["--namespace", "agents"]);
    let run = export(&sb, &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    assert_no_secret("export", &run);
    let report = assert_valid("export", &run.stdout);
    let docs = documents(&run.stdout);
    assert_eq!(report.documents, docs.len());

    // One group, one VirtualMCPServer over it with steward's tool names.
    let vmcp = doc(&docs, "VirtualMCPServer", "ws");
    assert_eq!(vmcp["spec"]["groupRef"]["name"], "ws");
    let aggregation = &vmcp["spec"]["config"]["aggregation"];
    assert_eq!(aggregation["conflictResolution"], "prefix");
    assert_eq!(
        aggregation["conflictResolutionConfig"]["prefixFormat"],
        "{workload}__"
    );
    assert_eq!(vmcp["spec"]["incomingAuth"]["type"], "oidc");
    assert_eq!(
        vmcp["spec"]["incomingAuth"]["oidcConfigRef"]["name"],
        "ws-oidc"
    );
    assert!(run.stdout.contains("MCPOIDCConfig ws-oidc, a PLACEHOLDER"));
    assert_eq!(
        vmcp["spec"]["config"]["operational"]["timeouts"]["perWorkload"],
        json!({ "github": "45s", "time": "1500ms" })
    );
    // The MCPServerEntry's allow-list is applied by the VirtualMCPServer.
    assert_eq!(
        aggregation["tools"],
        json!([{ "workload": "claude", "toolConfigRef": { "name": "claude-tools" } }])
    );
    doc(&docs, "MCPGroup", "ws");
    for d in &docs {
        assert_eq!(d["metadata"]["namespace"], "agents", "{d}");
        assert_eq!(
            d["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "steward"
        );
    }

    // docker run: its image and the args after it; -e NAME passes the
    // token from a Secret, -e NAME=VALUE is a literal.
    let github = &doc(&docs, "MCPServer", "github")["spec"];
    assert_eq!(github["image"], "ghcr.io/github/github-mcp-server:v0.20.0");
    assert_eq!(github["args"], json!(["stdio"]));
    assert_eq!(github["transport"], "stdio");
    assert_eq!(github["proxyMode"], "streamable-http");
    assert_eq!(
        github["env"],
        json!([{ "name": "GITHUB_TOOLSETS", "value": "repos,issues" }])
    );
    assert_eq!(
        github["secrets"],
        json!([{ "name": "github-env-github-personal-access-token", "key": "value",
                 "targetEnvName": "GITHUB_PERSONAL_ACCESS_TOKEN" }])
    );
    assert_eq!(github["toolConfigRef"]["name"], "github-tools");
    assert_eq!(
        doc(&docs, "MCPToolConfig", "github-tools")["spec"]["toolsFilter"],
        json!(["get_issue", "list_issues"])
    );
    assert!(run.stdout.contains("Dropped docker options: --network"));
    // The kubectl line names the variable, never its value.
    assert!(run.stdout.contains(
        "kubectl create secret generic github-env-github-personal-access-token --namespace agents --from-literal=value=\"$GH_TOKEN\""
    ));

    // npx / uvx: the image of --image and the args after the package.
    let everything = &doc(&docs, "MCPServer", "everything")["spec"];
    assert_eq!(
        everything["image"],
        "ghcr.io/acme/server-everything:2026.8.31"
    );
    assert_eq!(everything["args"], json!(["stdio"]));
    assert_eq!(
        everything["env"],
        json!([{ "name": "MODE", "value": "fast" }])
    );
    let secret_envs: Vec<&Value> = everything["secrets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["targetEnvName"])
        .collect();
    assert_eq!(secret_envs, [&json!("API_KEY"), &json!("DATABASE_URL")]);
    assert!(run.stdout.contains("Dropped: `trust`"));
    assert!(run.stdout.contains("Dropped: `cwd`"));
    let time = &doc(&docs, "MCPServer", "time")["spec"];
    assert_eq!(time["image"], "ghcr.io/acme/mcp-server-time:2026.10.19");
    assert_eq!(time["args"], json!(["--local-timezone=UTC"]));

    // Remote: entries in the group, the bearer token through an
    // MCPExternalAuthConfig, other headers from Secrets.
    let remote = &doc(&docs, "MCPServerEntry", "remote")["spec"];
    assert_eq!(remote["remoteUrl"], "https://mcp.example.com/mcp");
    assert_eq!(remote["transport"], "streamable-http");
    assert_eq!(remote["groupRef"]["name"], "ws");
    assert_eq!(remote["externalAuthConfigRef"]["name"], "remote-bearer");
    assert_eq!(
        doc(&docs, "MCPExternalAuthConfig", "remote-bearer")["spec"],
        json!({ "type": "bearerToken",
                "bearerToken": { "tokenSecretRef": { "name": "remote-bearer", "key": "token" } } })
    );
    assert_eq!(
        remote["headerForward"]["addHeadersFromSecret"],
        json!([{ "headerName": "X-Api-Key",
                 "valueSecretRef": { "name": "remote-header-x-api-key", "key": "value" } }])
    );
    assert!(
        run.stdout
            .contains("--from-literal=token=\"$REMOTE_TOKEN\"")
    );
    assert_eq!(
        doc(&docs, "MCPServerEntry", "claude")["spec"]["transport"],
        "streamable-http"
    );
    let events = &doc(&docs, "MCPServerEntry", "events")["spec"];
    assert_eq!(events["transport"], "sse");
    assert!(vmcp["spec"].get("authServerConfig").is_none(), "{vmcp}");

    // Secret stubs carry no data; each names the server it came from.
    let secrets: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "Secret").collect();
    assert_eq!(secrets.len(), 7, "{secrets:#?}");
    for s in secrets {
        assert!(
            s.get("data").is_none() && s.get("stringData").is_none(),
            "{s}"
        );
        assert!(s["metadata"]["annotations"]["steward.dev/server"].is_string());
    }

    // The binary's own check agrees.
    let out = sb.root.path().join("export.yaml");
    std::fs::write(&out, &run.stdout).unwrap();
    let check = sb.run(&[
        "export",
        "--format",
        "toolhive",
        "--check",
        out.to_str().unwrap(),
    ]);
    assert_eq!(check.code, 0, "{}{}", check.stdout, check.stderr);
    assert!(check.stdout.is_empty(), "{}", check.stdout);

    common::insta_settings(&sb)
        .bind(|| insta::assert_snapshot!("export_toolhive_representative", run.stdout));
}

#[test]
fn remote_proxies_and_anonymous_access_export_valid_resources() {
    let sb = representative();
    let out = sb.root.path().join("proxy.yaml");
    let mut args = IMAGES.to_vec();
    args.extend([
        "--remote-proxy",
        "--anonymous",
        "--name",
        "Team Tools",
        "--out",
        out.to_str().unwrap(),
    ]);
    let run = export(&sb, &args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "--out FILE writes nothing on stdout");
    let text = std::fs::read_to_string(&out).unwrap();
    let run = Run {
        stdout: text,
        ..run
    };
    assert_no_secret("export --remote-proxy", &run);
    assert_valid("export --remote-proxy", &run.stdout);
    let docs = documents(&run.stdout);
    let vmcp = doc(&docs, "VirtualMCPServer", "team-tools");
    assert_eq!(vmcp["spec"]["incomingAuth"], json!({ "type": "anonymous" }));
    assert!(!docs.iter().any(|d| d["kind"] == "MCPServerEntry"));
    let remote = &doc(&docs, "MCPRemoteProxy", "remote")["spec"];
    assert_eq!(remote["groupRef"]["name"], "team-tools");
    assert!(remote.get("oidcConfigRef").is_none());
    // A proxy takes its allow-list itself.
    assert_eq!(
        doc(&docs, "MCPRemoteProxy", "claude")["spec"]["toolConfigRef"]["name"],
        "claude-tools"
    );
    assert!(
        vmcp["spec"]["config"]["aggregation"].get("tools").is_none(),
        "{vmcp}"
    );
    common::insta_settings(&sb)
        .bind(|| insta::assert_snapshot!("export_toolhive_remote_proxy", run.stdout));
}

/// Remote entries that sign in with OAuth: `linear` with a client
/// registered by hand (its secret in the keyring) and its endpoints written
/// as Qwen Code writes them; `notes` (SSE) with no client, its
/// authorization server known from the user's last sign-in (the store holds
/// this machine's tokens and registration, which must never be exported);
/// `plain` needs none.
fn oauth_workspace() -> Env {
    let sb = Env::new();
    sb.write_home(
        "settings.json",
        &mcp_servers(&[
            (
                "linear",
                json!({
                    "httpUrl": "https://mcp.linear.example/mcp",
                    "oauth": { "enabled": true, "clientId": "steward-cluster",
                               "clientSecret": "${secret:linear-oauth}",
                               "authorizationUrl": "https://linear.example/oauth/authorize",
                               "tokenUrl": "https://api.linear.example/oauth/token",
                               "scopes": ["read", "write"],
                               "redirectUri": "http://127.0.0.1:61234/callback",
                               "account": "work" }
                }),
            ),
            (
                "notes",
                json!({ "url": "https://notes.example.com/sse", "oauth": { "enabled": true } }),
            ),
            (
                "plain",
                json!({ "httpUrl": "https://plain.example.com/mcp" }),
            ),
        ]),
    );
    let record = json!({
        "issuer": "https://auth.notes.example.com", "resource": "https://notes.example.com/",
        "account": "", "clientId": "dcr-client-of-this-machine",
        "clientSecret": "dcr-secret-of-this-machine", "authMethod": "client_secret_basic",
        "tokenEndpoint": "https://auth.notes.example.com/token",
        "authorizationEndpoint": "https://auth.notes.example.com/authorize",
        "registrationEndpoint": "https://auth.notes.example.com/register",
        "accessToken": "at-of-this-machine", "tokenType": "Bearer",
        "refreshToken": "rt-of-this-machine", "scopes": ["notes:read", "offline_access"],
        "obtainedAt": 1,
    });
    let key = "token https://auth.notes.example.com https://notes.example.com/";
    let store = json!({ "version": 1, "secrets": { key: record.to_string() } });
    write_private(&sb.home.join("steward/oauth.json"), &store.to_string());
    let secrets = json!({ "version": 1, "secrets": { "linear-oauth": "cs-in-keyring" } });
    write_private(&sb.home.join("steward/secrets.json"), &secrets.to_string());
    sb
}

/// `text` in a 0600 file in a 0700 directory (as Steward's file stores are).
fn write_private(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap();
    std::fs::create_dir_all(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[test]
fn oauth_entries_sign_in_through_toolhives_embedded_authorization_server() {
    let sb = oauth_workspace();
    let run = export(&sb, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_no_secret("export of OAuth entries", &run);
    assert_valid("export of OAuth entries", &run.stdout);
    let docs = documents(&run.stdout);

    // Behind the VirtualMCPServer: one upstream provider per entry in its
    // embedded authorization server, whose token upstreamInject puts on
    // that entry's requests.
    let vmcp = &doc(&docs, "VirtualMCPServer", "ws")["spec"];
    let auth = &vmcp["authServerConfig"];
    assert_eq!(auth["issuer"], "https://ws.example.invalid");
    assert_eq!(
        auth["upstreamProviders"],
        json!([
            { "name": "linear", "type": "oauth2", "oauth2Config": {
                "authorizationEndpoint": "https://linear.example/oauth/authorize",
                "tokenEndpoint": "https://api.linear.example/oauth/token",
                "clientId": "steward-cluster",
                "clientSecretRef": { "name": "linear-oauth", "key": "value" },
                "scopes": ["read", "write"],
                "additionalAuthorizationParams": { "resource": "https://mcp.linear.example/mcp" } } },
            { "name": "notes", "type": "oauth2", "oauth2Config": {
                "authorizationEndpoint": "https://auth.notes.example.com/authorize",
                "tokenEndpoint": "https://auth.notes.example.com/token",
                "dcrConfig": { "registrationEndpoint": "https://auth.notes.example.com/register" },
                "scopes": ["notes:read", "offline_access"],
                "additionalAuthorizationParams": { "resource": "https://notes.example.com/" } } },
        ])
    );
    // Its users' tokens are the embedded server's, for its own URL.
    assert_eq!(
        vmcp["incomingAuth"]["oidcConfigRef"],
        json!({ "name": "ws-oidc", "audience": "https://ws.example.invalid/mcp",
                "resourceUrl": "https://ws.example.invalid/mcp" })
    );
    assert!(
        run.stdout
            .contains("PLACEHOLDER issuer https://ws.example.invalid")
    );
    for (entry, transport) in [("linear", "streamable-http"), ("notes", "sse")] {
        let spec = &doc(&docs, "MCPServerEntry", entry)["spec"];
        assert_eq!(spec["transport"], transport);
        assert_eq!(
            spec["externalAuthConfigRef"]["name"],
            format!("{entry}-oauth")
        );
        assert_eq!(
            doc(&docs, "MCPExternalAuthConfig", &format!("{entry}-oauth"))["spec"],
            json!({ "type": "upstreamInject", "upstreamInject": { "providerName": entry } })
        );
    }
    assert!(
        doc(&docs, "MCPServerEntry", "plain")["spec"]
            .get("externalAuthConfigRef")
            .is_none()
    );
    // The client secret: a stub named after the keyring secret, filled
    // from the keyring, never shown.
    let stub = doc(&docs, "Secret", "linear-oauth");
    assert!(stub.get("data").is_none() && stub.get("stringData").is_none());
    assert!(run.stdout.contains(
        "kubectl create secret generic linear-oauth --from-literal=value=\"$(secret-tool lookup service steward name linear-oauth)\""
    ));
    // What stays on this machine is said, field by field.
    assert!(
        run.stdout
            .contains("Dropped: `oauth.redirectUri` http://127.0.0.1:61234/callback")
    );
    assert!(run.stdout.contains("Dropped: `oauth.account` \"work\""));
    assert!(
        run.stdout
            .contains("The client steward-cluster must allow ToolHive's redirect URI")
    );

    // As remote proxies: each its own embedded authorization server, named
    // by authServerRef; its users' tokens checked against its own issuer.
    let run = export(&sb, &["--remote-proxy"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_no_secret("export --remote-proxy of OAuth entries", &run);
    assert_valid("export --remote-proxy of OAuth entries", &run.stdout);
    let docs = documents(&run.stdout);
    let notes = &doc(&docs, "MCPRemoteProxy", "notes")["spec"];
    assert_eq!(
        notes["authServerRef"],
        json!({ "kind": "MCPExternalAuthConfig", "name": "notes-oauth" })
    );
    assert!(notes.get("externalAuthConfigRef").is_none());
    assert_eq!(
        notes["oidcConfigRef"],
        json!({ "name": "notes-oidc", "audience": "https://notes.example.invalid/mcp",
                "resourceUrl": "https://notes.example.invalid/mcp" })
    );
    let embedded = &doc(&docs, "MCPExternalAuthConfig", "notes-oauth")["spec"];
    assert_eq!(embedded["type"], "embeddedAuthServer");
    assert_eq!(
        embedded["embeddedAuthServer"]["issuer"],
        "https://notes.example.invalid"
    );
    assert_eq!(
        embedded["embeddedAuthServer"]["upstreamProviders"][0]["oauth2Config"]["dcrConfig"],
        json!({ "registrationEndpoint": "https://auth.notes.example.com/register" })
    );
    assert!(
        doc(&docs, "VirtualMCPServer", "ws")["spec"]
            .get("authServerConfig")
            .is_none()
    );
    assert_eq!(
        doc(&docs, "MCPRemoteProxy", "plain")["spec"]["oidcConfigRef"]["name"],
        "ws-oidc"
    );

    // --anonymous cannot carry a user's sign-in: those two are refused,
    // the rest is written.
    let run = export(&sb, &["--anonymous"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_no_secret("export --anonymous of OAuth entries", &run);
    let refused: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(refused.len(), 2, "{}", run.stderr);
    for (line, entry) in refused.iter().zip(["linear", "notes"]) {
        assert!(
            line.starts_with(&format!("steward: refused {entry}: it signs in with OAuth")),
            "{line}"
        );
        assert!(line.contains("--anonymous"), "{line}");
    }
    assert_valid("export --anonymous of OAuth entries", &run.stdout);
    doc(&documents(&run.stdout), "MCPServerEntry", "plain");
}

#[test]
fn an_oauth_entry_whose_authorization_server_is_unknown_is_refused_with_the_fix() {
    let sb = Env::new();
    sb.write_home(
        "settings.json",
        &mcp_servers(&[(
            "hosted",
            json!({ "httpUrl": "https://hosted.example.com/mcp",
                    "oauth": { "enabled": true, "clientId": "c" } }),
        )]),
    );
    let run = export(&sb, &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stderr.trim(),
        "steward: refused hosted: it signs in with OAuth, and its authorization server's endpoints are unknown here (the entry names none and Steward has no sign-in to it that recorded them); sign in once with `steward auth login hosted` and export again, or write oauth.authorizationUrl and oauth.tokenUrl"
    );
    assert!(!run.stdout.contains("kind: MCPServerEntry"));
}

#[test]
fn long_and_colliding_names_become_distinct_dns_labels() {
    let sb = Env::new();
    let long = "An_Extremely_Long_MCP_Server_Name_For_The_Internal_Search_Cluster";
    let docker = |image: &str| json!({ "command": "docker", "args": ["run", "-i", "--rm", image] });
    sb.write_home(
        "settings.json",
        &mcp_servers(&[
            ("search", docker("ghcr.io/acme/search:1")),
            ("Search", docker("ghcr.io/acme/search:2")),
            ("my_db", docker("ghcr.io/acme/db:1")),
            ("my-db", docker("ghcr.io/acme/db:2")),
            (long, docker("ghcr.io/acme/long:1")),
            (
                "My.Remote",
                json!({ "httpUrl": "https://r.example.com/mcp",
                        "headers": { "Authorization": "Bearer ${NO_SUCH_VAR}" } }),
            ),
        ]),
    );
    let run = export(&sb, &["--anonymous"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_valid("export", &run.stdout);
    let docs = documents(&run.stdout);
    let workloads: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "MCPServer" || d["kind"] == "MCPServerEntry")
        .collect();
    assert_eq!(workloads.len(), 6);
    let mut names: Vec<&str> = workloads
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    for name in &names {
        assert!(name.len() <= 46, "{name}");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{name}"
        );
    }
    // The exact names keep theirs; the others get a stable suffix.
    assert!(names.contains(&"search") && names.contains(&"my-db"));
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 6, "names collide: {names:?}");
    let originals: Vec<&str> = workloads
        .iter()
        .map(|d| {
            d["metadata"]["annotations"]["steward.dev/server"]
                .as_str()
                .unwrap()
        })
        .collect();
    for original in ["search", "Search", "my_db", "my-db", long, "My.Remote"] {
        assert!(originals.contains(&original), "{original} not annotated");
    }
    // The same names on every run.
    let again = export(&sb, &["--anonymous"]);
    assert_eq!(again.stdout, run.stdout);
    common::insta_settings(&sb)
        .bind(|| insta::assert_snapshot!("export_toolhive_names", run.stdout));
}

/// One server per refusal, beside one that exports.
fn refused_workspace() -> Env {
    let sb = Env::new();
    sb.write_home(
        "settings.json",
        &mcp_servers(&[
            ("fine", json!({ "command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/acme/fine:1"] })),
            ("unpinned", json!({ "command": "npx", "args": ["-y", "some-mcp-server"] })),
            ("npx-pinned", json!({ "command": "npx", "args": ["-y", "@acme/mcp@1.4.2"] })),
            ("uvx-pinned", json!({ "command": "uvx", "args": ["acme-mcp==0.3.0"] })),
            ("script", json!({ "command": "node", "args": ["./server.js"] })),
            ("absolute", json!({ "command": "/opt/mcp/bin/server" })),
            ("loopback", json!({ "httpUrl": "http://127.0.0.1:8080/mcp" })),
            ("private", json!({ "url": "http://10.1.2.3/sse" })),
            ("in-cluster", json!({ "httpUrl": "http://mcp.tools.svc.cluster.local/mcp" })),
            (
                "excluded",
                json!({ "httpUrl": "https://x.example.com/mcp", "excludeTools": ["drop_table"] }),
            ),
            (
                "secret-arg",
                json!({ "command": "docker",
                        "args": ["run", "-i", "ghcr.io/acme/x:1", "--api-key", "sk-literal-env"] }),
            ),
            (
                "secret-url",
                json!({ "httpUrl": "https://x.example.com/mcp?token=sk-literal-header" }),
            ),
            (
                "nothing-allowed",
                json!({ "httpUrl": "https://y.example.com/mcp", "includeTools": [] }),
            ),
        ]),
    );
    sb
}

#[test]
fn each_refusal_is_one_stderr_line_with_exit_1_and_the_rest_is_written() {
    let sb = refused_workspace();
    let run = export(&sb, &["--anonymous"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_no_secret("refusals", &run);
    let expected = [
        (
            "absolute",
            "runs the local executable /opt/mcp/bin/server",
            "--image absolute=REF",
        ),
        (
            "excluded",
            "no controller runs for this workspace",
            "replace excludeTools with includeTools",
        ),
        ("in-cluster", "cluster-local address", "public address"),
        (
            "loopback",
            "loopback, private-range or cluster-local address",
            "public address",
        ),
        (
            "nothing-allowed",
            "allow no tool",
            "allow at least one tool",
        ),
        (
            "npx-pinned",
            "needs a container image",
            "thv build --tag REF npx://@acme/mcp@1.4.2` and pass --image npx-pinned=REF",
        ),
        (
            "private",
            "loopback, private-range or cluster-local address",
            "public address",
        ),
        (
            "script",
            "runs the local script ./server.js with node",
            "--image script=REF",
        ),
        (
            "secret-arg",
            "an argument holds a ${VAR} reference or a credential",
            "through `env`",
        ),
        (
            "secret-url",
            "its URL holds a ${VAR} reference or a credential",
            "move the credential to a header",
        ),
        ("unpinned", "is not pinned to a version", "pin a version"),
        (
            "uvx-pinned",
            "needs a container image",
            "thv build --tag REF uvx://acme-mcp@0.3.0",
        ),
    ];
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), expected.len(), "{}", run.stderr);
    for (line, (server, reason, fix)) in lines.iter().zip(expected) {
        let prefix = format!("steward: refused {server}: ");
        assert!(line.starts_with(&prefix), "{line}");
        let (why, what) = line[prefix.len()..]
            .split_once("; ")
            .unwrap_or_else(|| panic!("no `; what to do` in {line}"));
        assert!(why.contains(reason), "{server}: {why}");
        assert!(what.contains(fix), "{server}: {what}");
    }
    // The server that maps is still written, valid; the refused ones are
    // listed in the header, not exported.
    assert_valid("export with refusals", &run.stdout);
    let docs = documents(&run.stdout);
    doc(&docs, "MCPServer", "fine");
    let workloads = docs
        .iter()
        .filter(|d| d["kind"] == "MCPServer" || d["kind"] == "MCPServerEntry")
        .count();
    assert_eq!(workloads, 1);
    assert!(
        run.stdout
            .contains("# Refused, not exported (also on stderr):")
    );
    common::insta_settings(&sb)
        .bind(|| insta::assert_snapshot!("export_toolhive_refusals_stderr", run.stderr));
}

#[test]
fn an_image_stands_for_a_local_command() {
    let sb = Env::new();
    sb.write_home(
        "settings.json",
        &mcp_servers(&[
            (
                "script",
                json!({ "command": "node", "args": ["./server.js", "--stdio"] }),
            ),
            (
                "module",
                json!({ "command": "python3", "args": ["-m", "acme.mcp", "-v"] }),
            ),
            (
                "absolute",
                json!({ "command": "/opt/mcp/bin/server", "args": ["serve"] }),
            ),
        ]),
    );
    let run = export(
        &sb,
        &[
            "--anonymous",
            "--image",
            "script=ghcr.io/acme/script:1",
            "--image",
            "module=ghcr.io/acme/module:1",
            "--image",
            "absolute=ghcr.io/acme/absolute:1",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_valid("export", &run.stdout);
    let docs = documents(&run.stdout);
    let args = |name: &str| doc(&docs, "MCPServer", name)["spec"]["args"].clone();
    assert_eq!(args("script"), json!(["--stdio"]));
    assert_eq!(args("module"), json!(["-v"]));
    assert_eq!(args("absolute"), json!(["serve"]));
    assert!(run.stdout.contains("stands for `python3 -m acme.mcp`"));

    // An --image for a server that does not exist is a usage error.
    let run = export(&sb, &["--image", "nope=ghcr.io/acme/x:1"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("no MCP server is named \"nope\""),
        "{}",
        run.stderr
    );
}

#[test]
fn blocked_servers_are_listed_unless_included() {
    let sb = Env::new();
    sb.write_home(
        "settings.json",
        &mcp_servers(&[(
            "user",
            json!({ "command": "docker", "args": ["run", "-i", "ghcr.io/acme/user:1"] }),
        )]),
    );
    sb.write(
        ".qwen/settings.json",
        &mcp_servers(&[(
            "project",
            json!({ "command": "docker", "args": ["run", "-i", "ghcr.io/acme/project:1"] }),
        )]),
    );
    let run = export(&sb, &["--anonymous"]);
    assert_eq!(run.code, 0, "blocked is not refused: {}", run.stderr);
    assert!(
        run.stdout.contains("# Blocked here, not exported"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("#   project (PendingApproval): a workspace settings server needs approval"),
        "{}",
        run.stdout
    );
    let docs = documents(&run.stdout);
    assert!(!docs.iter().any(|d| d["metadata"]["name"] == "project"));
    doc(&docs, "MCPServer", "user");
    common::insta_settings(&sb)
        .bind(|| insta::assert_snapshot!("export_toolhive_blocked", run.stdout));

    let run = export(&sb, &["--anonymous", "--include-blocked"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_valid("export --include-blocked", &run.stdout);
    let docs = documents(&run.stdout);
    doc(&docs, "MCPServer", "project");
    assert!(
        run.stdout
            .contains("# Blocked here (PendingApproval), exported by --include-blocked.")
    );
}

#[test]
fn exclude_tools_uses_the_running_controllers_tool_list() {
    let sb = Env::new();
    let mut entry = sb.fake_mcp("db", fake_tools(&["query", "describe", "drop_table"]));
    entry["excludeTools"] = json!(["drop_table"]);
    sb.user_mcp_servers(&[("db", entry)]);
    let controller = sb.start(&[]);
    controller.wait_for("db Ready", |s| ready(s, "db"));

    let run = export(&sb, &["--anonymous", "--image", "db=ghcr.io/acme/db:1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_valid("export", &run.stdout);
    let docs = documents(&run.stdout);
    let filter = &doc(&docs, "MCPToolConfig", "db-tools")["spec"]["toolsFilter"];
    let mut tools: Vec<&str> = filter
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    tools.sort();
    assert_eq!(tools, ["describe", "query"]);
    assert!(
        run.stdout.contains(
            "# Allow-list from includeTools/excludeTools over the tool list of the running controller."
        ),
        "{}",
        run.stdout
    );

    // With the controller stopped, the catalog cache of its last run gives
    // the same allow-list, and says so.
    let mut controller = controller;
    let stopped = controller.terminate().expect("the controller exits");
    assert!(stopped.success(), "{stopped:?}");
    let run = export(&sb, &["--anonymous", "--image", "db=ghcr.io/acme/db:1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_valid("export from the cache", &run.stdout);
    let docs = documents(&run.stdout);
    let filter = &doc(&docs, "MCPToolConfig", "db-tools")["spec"]["toolsFilter"];
    let mut cached: Vec<&str> = filter
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    cached.sort();
    assert_eq!(cached, ["describe", "query"]);
    assert!(
        run.stdout
            .contains("the catalog cache (the server's last run)"),
        "{}",
        run.stdout
    );
}

#[test]
fn exclude_tools_of_a_server_that_is_not_ready_is_refused() {
    let sb = Env::new();
    let mut up = sb.fake_mcp("up", fake_tools(&["a"]));
    up["excludeTools"] = json!(["a"]);
    sb.user_mcp_servers(&[
        ("up", up),
        (
            "down",
            json!({ "command": "acme-mcp-that-is-not-installed", "excludeTools": ["x"] }),
        ),
    ]);
    let controller = sb.start(&[]);
    controller.wait_for("up Ready", |s| ready(s, "up"));
    let run = export(
        &sb,
        &[
            "--anonymous",
            "--image",
            "up=ghcr.io/acme/up:1",
            "--image",
            "down=ghcr.io/acme/down:1",
        ],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "steward: refused down: excludeTools needs the server's tool list (ToolHive filters by allow-list only), and the running controller has none (the server is not Ready)"
        ),
        "{}",
        run.stderr
    );
    // `up` lists only `a`, which is excluded: nothing is allowed.
    assert!(
        run.stderr
            .contains("steward: refused up: its tool filters allow no tool"),
        "{}",
        run.stderr
    );
}

/// ToolHive's own examples validate with the same validator — so it is
/// known to accept real manifests — and so they do through the binary.
#[test]
fn toolhive_examples_validate() {
    let dir = toolhive_dir().join("examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 6, "{files:?}");
    let sb = Env::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let report = crds().check(&text, file).unwrap();
        assert!(
            report.problems.is_empty(),
            "{}: {:?}",
            file.display(),
            report.problems
        );
        let run = sb.run(&[
            "export",
            "--format",
            "toolhive",
            "--check",
            file.to_str().unwrap(),
        ]);
        assert_eq!(
            run.code,
            0,
            "{}: {}{}",
            file.display(),
            run.stdout,
            run.stderr
        );
    }
    // --crds DIR reads CRD files instead of the built-in ones.
    let crds_dir = toolhive_dir().join("crds");
    let run = sb.run(&[
        "export",
        "--format",
        "toolhive",
        "--check",
        files[0].to_str().unwrap(),
        "--crds",
        crds_dir.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "checked against the CRDs in {}",
            crds_dir.display()
        )),
        "{}",
        run.stderr
    );
}

/// A broken copy of an example fails, each problem with its document and
/// JSON path — so the validator can fail.
#[test]
fn a_broken_example_fails_with_document_and_path() {
    let path = toolhive_dir().join("examples/vmcp_conflict_resolution.yaml");
    let good = std::fs::read_to_string(&path).unwrap();
    let broken = good
        // Document 5: an enum value that does not exist.
        .replacen(
            "conflictResolution: prefix",
            "conflictResolution: prefixed",
            1,
        )
        // Document 2: a required field removed, an unknown one added.
        .replacen(
            "  image: ghcr.io/stackloklabs/yardstick/yardstick-server:1.1.1\n  transport: sse\n",
            "  transport: sse\n  imag: ghcr.io/stackloklabs/yardstick/yardstick-server:1.1.1\n",
            1,
        )
        // Document 3: a string where an integer belongs.
        .replacen("  proxyPort: 8080\n", "  proxyPort: eighty\n", 2)
        .replacen("  proxyPort: eighty\n", "  proxyPort: 8080\n", 1);
    assert_ne!(broken, good);
    let report = crds().check(&broken, &path).unwrap();
    let found: Vec<(usize, &str)> = report
        .problems
        .iter()
        .map(|p| (p.document, p.path.as_str()))
        .collect();
    for want in [
        (2, ".spec"),
        (3, ".spec.proxyPort"),
        (5, ".spec.config.aggregation.conflictResolution"),
    ] {
        assert!(found.contains(&want), "{want:?} not in {found:?}");
    }
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.document == 2 && p.message.contains("imag")),
        "{:?}",
        report.problems
    );

    // The binary says the same, on stdout, and exits 1.
    let sb = Env::new();
    let file = sb.root.path().join("broken.yaml");
    std::fs::write(&file, &broken).unwrap();
    let run = sb.run(&[
        "export",
        "--format",
        "toolhive",
        "--check",
        file.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.lines().any(|l| l.contains(
            "document 5 (VirtualMCPServer/vmcp-prefix-strategy): .spec.config.aggregation.conflictResolution:"
        )),
        "{}",
        run.stdout
    );
    assert!(run.stderr.contains("7 documents"), "{}", run.stderr);

    // `--check -` reads the manifest from stdin.
    let run = run_with_input(
        sb.cli(&["export", "--format", "toolhive", "--check", "-"]),
        broken.as_bytes(),
    );
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .starts_with("(stdin): document 2 (MCPServer/yardstick-sse): .spec"),
        "{}",
        run.stdout
    );
}

#[test]
fn permission_profiles_map_to_toolhive_builtins_and_a_custom_one_to_a_configmap() {
    let sb = Env::new();
    let docker = |image: &str, sandbox: Value| json!({"command": "docker", "args": ["run", "-i", "--rm", image], "sandbox": sandbox});
    sb.write_home(
        "settings.json",
        &json!({
            "mcpServers": {
                "quiet": docker("ghcr.io/acme/quiet:1", json!("none")),
                "online": docker("ghcr.io/acme/online:1", json!("network")),
                "github": docker("ghcr.io/acme/github:1", json!("gh")),
                "plain": {"command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/acme/plain:1"]},
            },
            "steward": {"sandbox": {"profiles": {"gh": {
                "read": ["./data"],
                "network": {"outbound": {"allow_host": ["api.github.com"], "allow_port": [443]}}
            }}}},
        })
        .to_string(),
    );
    let run = export(&sb, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let docs = documents(&run.stdout);
    let profile = |name: &str| doc(&docs, "MCPServer", name)["spec"]["permissionProfile"].clone();
    assert_eq!(profile("quiet"), json!({"type": "builtin", "name": "none"}));
    assert_eq!(
        profile("online"),
        json!({"type": "builtin", "name": "network"})
    );
    // standard: network, with a comment saying what a container already gives.
    assert_eq!(
        profile("plain"),
        json!({"type": "builtin", "name": "network"})
    );
    assert!(run.stdout.contains("# sandbox standard:"), "{}", run.stdout);
    // A custom profile: a ConfigMap holding it in ToolHive's shape.
    let custom = profile("github");
    assert_eq!(custom["type"], json!("configmap"), "{custom}");
    let map = doc(&docs, "ConfigMap", custom["name"].as_str().unwrap());
    let held: Value = serde_json::from_str(
        map["data"][custom["key"].as_str().unwrap()]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        held["network"]["outbound"]["allow_host"],
        json!(["api.github.com"])
    );
    assert_eq!(held["network"]["outbound"]["allow_port"], json!([443]));
    assert_eq!(held["read"], json!(["./data"]));
    // Every document is valid against the operator's CRDs.
    assert_valid("the sandbox export", &run.stdout);
}

//! The agent endpoint (`steward mcp`) with the real clients
//! agents use: the PyPI `mcp` SDK's `ClientSession` over stdio, the MCP
//! Inspector CLI and `qwen mcp list` from Qwen Code, against fake servers
//! and the real `server-everything`. Every wait is a condition with a
//! deadline; every client and controller a test starts is stopped by it.

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;

use crate::real_clients::{
    CLIENT_DEADLINE, ModernClient, PyClient, everything, http_url, inspector, output_within,
    steward_mcp_argv, text_of,
};
use serde_json::{Value, json};
use steward_schema::resource::{Phase, Reason};
use steward_tests::fake_mcp::FakeMcpConfig;
use steward_tests::harness::{
    Controller, Env, alive, fake_tools as tools, mcp, ready, recorded_pids, wait_until,
};

/// How many times the controller (`--log-format json`) applied a change of
/// the source file `path`.
fn applied_changes(c: &Controller, path: &std::path::Path) -> usize {
    let path = path.to_string_lossy();
    c.log_text()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| {
            l.pointer("/fields/message") == Some(&json!("source changed"))
                && l.pointer("/fields/source").and_then(Value::as_str) == Some(&path)
        })
        .count()
}

fn list_changed(notifications: &[String]) -> Vec<&String> {
    notifications
        .iter()
        .filter(|n| n.ends_with("/list_changed"))
        .collect()
}

#[test]
fn the_first_list_of_an_agent_that_starts_steward_mcp_shows_the_servers_of_the_cold_start() {
    // Agents list once when they connect (Qwen Code drops a server whose
    // lists are all empty); `steward mcp` answers `initialize` before any
    // server of the cold start is Ready.
    let env = Env::new();
    let mut slow = tools(&["t1"]);
    slow.initialize_delay_ms = 1000;
    env.user_mcp_servers(&[
        ("alpha", env.fake_mcp("alpha", slow)),
        ("beta", env.fake_mcp("beta", tools(&["b1"]))),
    ]);
    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    let mut names = client.tool_names();
    names.sort();
    assert_eq!(names, ["alpha__t1", "beta__b1"], "{}", client.stderr_text());
    let stderr = client.close();
    let pids = recorded_pids(&env.records());
    assert_eq!(pids.len(), 2, "one process per server");
    wait_until("the servers stop when the agent leaves", || {
        pids.iter().all(|p| !alive(*p))
    });
    assert!(stderr.contains("controller stopped"), "{stderr}");
}

#[test]
fn python_sdk_over_stdio_lists_calls_every_content_type_and_sees_list_changed_only_for_real_edits()
{
    let env = Env::new();
    let alpha = env.fake_mcp("alpha", tools(&["t1"]));
    env.user_mcp_servers(&[("alpha", alpha.clone()), ("everything", everything())]);
    let c = env.start(&["--log-format", "json"]);
    c.wait_for_within("alpha and everything Ready", CLIENT_DEADLINE, |s| {
        ready(s, "alpha") && ready(s, "everything")
    });
    // `steward mcp` attaches to the running controller.
    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    let names = client.tool_names();
    for name in ["alpha__t1", "everything__echo", "everything__get-sum"] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    let gateway = c.status().controller.gateway.unwrap();
    assert_eq!(gateway.clients.get("unix"), Some(&1), "{gateway:?}");

    // Every content type, as the server sent it.
    let content = json!([
        {"type": "text", "text": "hello", "annotations": {"audience": ["user"], "priority": 0.5}},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        {"type": "audio", "data": "UklGRiQAAABXQVZF", "mimeType": "audio/wav",
         "annotations": {"audience": ["assistant"]}, "_meta": {"x-steward-test": 1}},
        {"type": "resource_link", "uri": "file:///tmp/a.txt", "name": "a.txt", "mimeType": "text/plain"},
        {"type": "resource", "resource": {"uri": "file:///tmp/b.bin", "mimeType": "application/octet-stream", "blob": "AAEC"}},
    ]);
    let (result, _) = client.call("alpha__t1", json!({"content": content}));
    assert_eq!(result["isError"], json!(false), "{result}");
    assert_eq!(result["content"], content, "content unchanged");
    let (result, _) = client.call("everything__echo", json!({"message": "hi"}));
    assert_eq!(text_of(&result), "Echo: hi");

    // A formatting-only save: applied (the controller saw it), nothing sent.
    let settings = env.home.join("settings.json");
    let before = applied_changes(&c, &settings);
    let compact = json!({"mcpServers": {"alpha": alpha, "everything": everything()}});
    env.write_home("settings.json", &serde_json::to_string(&compact).unwrap());
    wait_until("the formatting-only save is applied", || {
        applied_changes(&c, &settings) > before
    });
    // A real edit: alpha offers one more tool.
    let mut config: FakeMcpConfig =
        serde_json::from_str(alpha["env"]["FAKE_MCP_CONFIG"].as_str().unwrap()).unwrap();
    config.tools.push("t2".into());
    let mut edited = alpha.clone();
    edited["env"]["FAKE_MCP_CONFIG"] = json!(config.to_json());
    env.user_mcp_servers(&[("alpha", edited), ("everything", everything())]);
    let seen = client.wait_notification("notifications/tools/list_changed", 1);
    assert!(client.tool_names().iter().any(|n| n == "alpha__t2"));
    let seen_after = client.notifications();
    assert_eq!(
        list_changed(&seen_after),
        ["notifications/tools/list_changed"],
        "one tools/list_changed for the edit, none for the formatting save (first seen: {seen:?})"
    );
    let stderr = client.close();
    assert!(!stderr.contains("Traceback"), "{stderr}");
    wait_until("the agent detached", || {
        c.status().controller.gateway.unwrap().clients.is_empty()
    });
}

/// Times such as `9:27:42 AM` (server-everything stamps resources with the
/// time they were made) replaced by `<time>`.
fn mask_times(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let digits = |at: usize, n: usize| {
            (0..n).all(|k| chars.get(at + k).is_some_and(char::is_ascii_digit))
        };
        let hour = if digits(i, 2) {
            2
        } else if digits(i, 1) {
            1
        } else {
            0
        };
        let preceded_by_digit = i > 0 && chars[i - 1].is_ascii_digit();
        if hour > 0
            && !preceded_by_digit
            && chars.get(i + hour) == Some(&':')
            && digits(i + hour + 1, 2)
            && chars.get(i + hour + 3) == Some(&':')
            && digits(i + hour + 4, 2)
        {
            out.push_str("<time>");
            i += hour + 6;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = ALPHABET.iter().position(|a| *a == c)? as u32;
        bits = (bits << 6) | v;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    Some(out)
}

/// `v` with times masked, in text and in base64 blobs.
fn normalize(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(mask_times(s)),
        Value::Array(a) => Value::Array(a.iter().map(normalize).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("blob", Value::String(b)) => match base64_decode(b) {
                            Some(bytes) => json!(format!(
                                "decoded: {}",
                                mask_times(&String::from_utf8_lossy(&bytes))
                            )),
                            None => v.clone(),
                        },
                        _ => normalize(v),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

#[test]
fn masking_hides_times_and_nothing_else() {
    assert_eq!(
        mask_times("created at 9:27:42 AM, 12:00:01 PM"),
        "created at <time> AM, <time> PM"
    );
    assert_eq!(mask_times("v1:2:3 and 10:5"), "v1:2:3 and 10:5");
    assert_eq!(
        base64_decode("UmVzb3VyY2UgMw==").unwrap(),
        b"Resource 3".to_vec()
    );
}

#[test]
fn pass_through_with_server_everything_is_what_the_server_itself_answers() {
    let env = Env::new();
    env.user_mcp_servers(&[("everything", everything())]);
    let c = env.start(&[]);
    c.wait_for_within("everything Ready", CLIENT_DEADLINE, |s| {
        ready(s, "everything")
    });
    let mut gateway = PyClient::stdio(&env, &steward_mcp_argv(&env));
    let entry = everything();
    let direct_argv: Vec<String> = std::iter::once(entry["command"].as_str().unwrap().to_owned())
        .chain(["stdio".to_owned()])
        .collect();
    let mut direct = PyClient::stdio(&env, &direct_argv);
    const P: &str = "everything__";

    // Tools: every tool the server offers this client is offered through
    // the gateway, identical but for the name. (The server adds tools for
    // client capabilities; Steward declares roots, so it may see more.)
    // `execution` (protocol 2025-11-25 tasks) included, which rmcp does not
    // type; a call without a task to a tool that requires one gets the
    // server's own refusal (legacy_tasks.rs calls it with one).
    let through: BTreeMap<String, Value> = gateway
        .list("list_tools")
        .into_iter()
        .map(|mut t| {
            let name = t["name"].as_str().unwrap().to_owned();
            let original = name.strip_prefix(P).expect("prefixed").to_owned();
            t["name"] = json!(original);
            (original, t)
        })
        .collect();
    let own = direct.list("list_tools");
    assert!(own.len() >= 10, "{own:?}");
    let mut task_tools = Vec::new();
    for tool in &own {
        let name = tool["name"].as_str().unwrap().to_owned();
        match tool.get("execution") {
            None => {}
            Some(e) if e == &json!({"taskSupport": "forbidden"}) => {}
            Some(_) => task_tools.push(name.clone()),
        }
        assert_eq!(through.get(&name), Some(tool), "tool {name}");
    }
    for tool in task_tools {
        let arguments = json!({"topic": "steward"});
        let (want, _) = direct.call(&tool, arguments.clone());
        let (got, _) = gateway.call(&format!("{P}{tool}"), arguments);
        assert_eq!(got, want, "tools/call {tool} (it requires a task)");
    }

    // Calls: text, structured content, images, annotations, resource links,
    // embedded resources, progress.
    let calls = [
        ("echo", json!({"message": "hi"})),
        ("get-sum", json!({"a": 1, "b": 2})),
        ("get-structured-content", json!({"location": "New York"})),
        ("get-tiny-image", json!({})),
        (
            "get-annotated-message",
            json!({"messageType": "error", "includeImage": true}),
        ),
        ("get-resource-links", json!({"count": 3})),
        (
            "get-resource-reference",
            json!({"resourceType": "Text", "resourceId": 2}),
        ),
        (
            "trigger-long-running-operation",
            json!({"duration": 1, "steps": 3}),
        ),
    ];
    for (tool, arguments) in calls {
        let (want, want_progress) = direct.call(tool, arguments.clone());
        let (got, got_progress) = gateway.call(&format!("{P}{tool}"), arguments);
        assert_eq!(normalize(&got), normalize(&want), "tools/call {tool}");
        assert_eq!(got_progress, want_progress, "progress of {tool}");
    }
    let (_, progress) = gateway.call(
        &format!("{P}trigger-long-running-operation"),
        json!({"duration": 1, "steps": 3}),
    );
    assert_eq!(progress.len(), 3, "{progress:?}");

    // Resources and templates: listed alike, read by URI through the gateway,
    // plus the resource that holds the server's instructions whole.
    let (steward, listed): (Vec<Value>, Vec<Value>) = gateway
        .list("list_resources")
        .into_iter()
        .partition(|r| r["uri"].as_str().unwrap().starts_with("steward://"));
    assert_eq!(listed, direct.list("list_resources"), "list_resources");
    let uris: Vec<&str> = steward.iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert_eq!(uris, ["steward://instructions/everything"]);
    let read = gateway.run(json!({"op": "read_resource", "uri": uris[0]}));
    let whole = read["contents"][0]["text"].as_str().unwrap().to_owned();
    assert!(
        whole.len() > 100,
        "server-everything's instructions: {whole}"
    );
    assert_eq!(
        gateway.list("list_resource_templates"),
        direct.list("list_resource_templates"),
        "list_resource_templates"
    );
    let templates = gateway.list("list_resource_templates");
    assert!(templates.len() >= 2, "{templates:?}");
    for uri in [
        "demo://resource/static/document/architecture.md",
        "demo://resource/dynamic/text/3",
        "demo://resource/dynamic/blob/3",
    ] {
        let read = json!({"op": "read_resource", "uri": uri});
        let want = direct.run(read.clone());
        let got = gateway.run(read);
        assert_eq!(normalize(&got), normalize(&want), "resources/read {uri}");
        assert!(got["contents"][0]["uri"] == json!(uri), "{got}");
    }

    // Prompts: listed alike but for the names, got alike.
    let through: Vec<Value> = gateway
        .list("list_prompts")
        .into_iter()
        .map(|mut p| {
            let name = p["name"]
                .as_str()
                .unwrap()
                .strip_prefix(P)
                .unwrap()
                .to_owned();
            p["name"] = json!(name);
            p
        })
        .collect();
    assert_eq!(through, direct.list("list_prompts"));
    for (prompt, arguments) in [
        ("simple-prompt", json!({})),
        ("args-prompt", json!({"city": "Paris", "state": "TX"})),
        (
            "resource-prompt",
            json!({"resourceType": "Text", "resourceId": "2"}),
        ),
    ] {
        let want = direct.run(json!({"op": "get_prompt", "name": prompt, "arguments": arguments}));
        let got = gateway.run(
            json!({"op": "get_prompt", "name": format!("{P}{prompt}"), "arguments": arguments}),
        );
        assert_eq!(normalize(&got), normalize(&want), "prompts/get {prompt}");
    }
    gateway.close();
    direct.close();
}

#[test]
fn the_inspector_cli_lists_and_calls_through_steward_mcp_and_http() {
    let env = Env::new();
    env.user_mcp_servers(&[
        ("alpha", env.fake_mcp("alpha", tools(&["t1"]))),
        ("everything", everything()),
    ]);
    let c = env.start(&["--mcp-listen", "127.0.0.1:0"]);
    let s = c.wait_for_within("alpha and everything Ready", CLIENT_DEADLINE, |s| {
        ready(s, "alpha") && ready(s, "everything")
    });
    let url = http_url(&s);
    let names = |listed: &Value| -> Vec<String> {
        listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    for target in [steward_mcp_argv(&env), vec![url.clone()]] {
        let listed = inspector(&env, &target, &["--method", "tools/list"]);
        let listed = names(&listed);
        assert!(listed.contains(&"alpha__t1".to_owned()), "{listed:?}");
        assert!(
            listed.contains(&"everything__get-sum".to_owned()),
            "{listed:?}"
        );
        let sum = inspector(
            &env,
            &target,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "everything__get-sum",
                "--tool-arg",
                "a=1",
                "b=2",
            ],
        );
        assert_eq!(text_of(&sum), "The sum of 1 and 2 is 3.", "{sum}");
        let echoed = inspector(
            &env,
            &target,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "alpha__t1",
                "--tool-arg",
                "k=v",
            ],
        );
        assert_eq!(text_of(&echoed), r#"{"k":"v"}"#, "{echoed}");
    }
    let read = inspector(
        &env,
        std::slice::from_ref(&url),
        &[
            "--method",
            "resources/read",
            "--uri",
            "demo://resource/dynamic/text/1",
        ],
    );
    assert!(
        read["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Resource 1:")),
        "{read}"
    );
    let prompt = inspector(
        &env,
        &[url],
        &[
            "--method",
            "prompts/get",
            "--prompt-name",
            "everything__args-prompt",
            "--prompt-args",
            "city=Paris",
        ],
    );
    assert!(prompt.to_string().contains("Paris"), "{prompt}");
    let s = c.status();
    assert_eq!(mcp(&s, "everything").unwrap().status.restarts, 0);
    assert_eq!(
        mcp(&s, "alpha").unwrap().status.calls.unwrap().failed,
        0,
        "{s:?}"
    );
}

/// `qwen ARGS` in the workspace, with the test's HOME and QWEN_HOME.
fn qwen(env: &Env, args: &[&str]) -> String {
    let qwen = common::peer("@qwen-code/qwen-code", "node_modules/.bin/qwen");
    let mut command = Command::new(qwen);
    command
        .args(args)
        .current_dir(&env.ws)
        .env_clear()
        .envs(env.steward_env())
        .env("NO_COLOR", "1");
    let out = output_within(command, CLIENT_DEADLINE);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "qwen {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The status `qwen mcp list` prints for `name` (after the ` - `).
fn qwen_says<'a>(listing: &'a str, name: &str) -> Option<&'a str> {
    listing
        .lines()
        .find(|l| l.contains(&format!(" {name}: ")))
        .and_then(|l| l.rsplit_once(" - "))
        .map(|(_, status)| status.trim())
}

#[test]
fn qwen_mcp_list_shows_steward_connected_and_steward_never_runs_its_own_entry() {
    let env = Env::new();
    let argv = steward_mcp_argv(&env);
    // What the README tells a Qwen Code user to register, in the same user
    // settings Steward reads its servers from.
    env.user_mcp_servers(&[
        ("steward", json!({"command": argv[0], "args": argv[1..]})),
        ("alpha", env.fake_mcp("alpha", tools(&["t1"]))),
    ]);

    // No controller: Qwen Code's `steward mcp` becomes it for the check,
    // and stops when Qwen Code hangs up.
    let listing = qwen(&env, &["mcp", "list"]);
    let line = format!("steward: {} (stdio) - Connected", argv.join(" "));
    assert!(listing.contains(&line), "{listing}");
    assert_eq!(qwen_says(&listing, "alpha"), Some("Connected"), "{listing}");
    wait_until("the controller Qwen Code started has exited", || {
        let out = env.steward(&["status", "-o", "json"]);
        String::from_utf8_lossy(&out.stderr).contains("no controller is running")
    });
    let offline = env.steward(&["status", "--offline", "-o", "json"]);
    let doc: Value = serde_json::from_slice(&offline.stdout).unwrap();
    let item = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == "steward")
        .unwrap();
    assert_eq!(item["status"]["reason"], "SelfReference", "{item}");

    // A running controller: the same entry is blocked, never spawned, and
    // Qwen Code's `steward mcp` attaches to it.
    let c = env.start(&[]);
    let s = c.wait_for("alpha Ready, steward blocked", |s| {
        ready(s, "alpha")
            && mcp(s, "steward").is_some_and(|m| {
                m.status.phase == Phase::Blocked && m.status.reason == Some(Reason::SelfReference)
            })
    });
    assert_eq!(mcp(&s, "steward").unwrap().status.pid, None);
    let listing = qwen(&env, &["mcp", "list"]);
    assert_eq!(
        qwen_says(&listing, "steward"),
        Some("Connected"),
        "{listing}"
    );
    let log = c.log_text();
    assert!(log.contains("agent client attached"), "{log}");
    wait_until("Qwen Code's session detached", || {
        c.status().controller.gateway.unwrap().clients.is_empty()
    });
    assert!(c.status().controller.running);
}

#[test]
fn an_agent_leaving_never_disconnects_the_others_nor_stops_new_ones_from_attaching() {
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["t1"])))]);
    let c = env.start(&["--mcp-listen", "127.0.0.1:0"]);
    let s = c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let url = http_url(&s);
    let mut staying = PyClient::stdio(&env, &steward_mcp_argv(&env));
    let mut over_http = PyClient::http(&env, &url, &[]);
    let leaving = PyClient::stdio(&env, &steward_mcp_argv(&env));
    leaving.close();
    wait_until("the leaving agent detached", || {
        c.status().controller.gateway.unwrap().clients.get("unix") == Some(&1)
    });
    for client in [&mut staying, &mut over_http] {
        let (result, _) = client.call("alpha__t1", json!({"still": "here"}));
        assert_eq!(text_of(&result), r#"{"still":"here"}"#);
    }
    let mut later = PyClient::stdio(&env, &steward_mcp_argv(&env));
    assert_eq!(later.tool_names(), ["alpha__t1"]);
    let mut later_http = PyClient::http(&env, &url, &[]);
    assert_eq!(later_http.tool_names(), ["alpha__t1"]);
    for client in [staying, over_http, later, later_http] {
        client.close();
    }
}

#[test]
fn an_agent_that_attaches_after_a_change_is_not_told_about_it() {
    // A change is announced one coalescing window after it; an agent that
    // connects inside that window already lists the new union.
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["t1"])))]);
    let c = env.start(&["--mcp-coalesce-ms", "10000"]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let announced = |s: &steward_schema::resource::WorkspaceStatus| {
        s.controller.gateway.clone().unwrap().last_list_changed
    };
    let before = announced(&c.status());
    let mut config = tools(&["t1", "t2"]);
    config.name = "alpha".into();
    config.record = Some(env.record("alpha"));
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", config))]);
    c.wait_for("alpha offers t2", |s| {
        mcp(s, "alpha").is_some_and(|m| {
            m.status.phase == Phase::Ready
                && m.status.tools.as_deref().unwrap_or_default().len() == 2
        })
    });
    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    assert_eq!(
        announced(&c.status()),
        before,
        "the agent attached within the window (the test is meaningful)"
    );
    assert_eq!(client.tool_names(), ["alpha__t1", "alpha__t2"]);
    c.wait_for_within("the change is announced", CLIENT_DEADLINE, |s| {
        announced(s) != before
    });
    // The announcement went out before this round trip's answer.
    assert_eq!(list_changed(&client.notifications()), Vec::<&String>::new());
    client.close();
}

#[test]
fn progress_reaches_the_agent_complete_and_in_order_before_the_answer() {
    // The server sends its progress and answers at once: the answer must
    // not overtake the progress, nor one notification another.
    let env = Env::new();
    env.user_mcp_servers(&[("alpha", env.fake_mcp("alpha", tools(&["t1"])))]);
    let c = env.start(&[]);
    c.wait_for("alpha Ready", |s| ready(s, "alpha"));
    let mut client = PyClient::stdio(&env, &steward_mcp_argv(&env));
    for call in 0..40 {
        let (result, progress) = client.call("alpha__t1", json!({"progress": 5}));
        assert_eq!(result["isError"], json!(false), "{result}");
        let seen: Vec<f64> = progress
            .iter()
            .map(|p| p["progress"].as_f64().unwrap())
            .collect();
        assert_eq!(seen, [1.0, 2.0, 3.0, 4.0, 5.0], "call {call}");
    }
    client.close();
}

#[test]
fn server_sampling_and_elicitation_reach_the_calling_agent_over_stdio_and_http() {
    let env = Env::new();
    env.user_mcp_servers(&[("everything", everything())]);
    let c = env.start(&["--mcp-listen", "127.0.0.1:0"]);
    let s = c.wait_for_within("everything Ready", CLIENT_DEADLINE, |s| {
        ready(s, "everything")
    });
    let url = http_url(&s);
    let both = ["--sampling", "--elicitation"];
    let sample = json!({"prompt": "hello"});
    for mut agent in [
        PyClient::stdio_with(&env, &both, &steward_mcp_argv(&env)),
        PyClient::http_with(&env, &both, &url, &[]),
    ] {
        let (result, _) = agent.call("everything__trigger-sampling-request", sample.clone());
        let text = text_of(&result);
        assert!(
            text.contains("sampled by the agent: Resource trigger-sampling-request context: hello"),
            "{result}"
        );
        let (result, _) = agent.call("everything__trigger-elicitation-request", json!({}));
        assert!(text_of(&result).contains("- Name: Agent"), "{result}");
        agent.close();
    }
    // Agents that did not declare the capabilities are told so (each on its
    // first call, when the server asks at once).
    for (what, tool) in [
        ("sampling", "everything__trigger-sampling-request"),
        ("elicitation", "everything__trigger-elicitation-request"),
    ] {
        for mut agent in [
            PyClient::stdio(&env, &steward_mcp_argv(&env)),
            PyClient::http(&env, &url, &[]),
        ] {
            let (result, _) = agent.call(tool, sample.clone());
            assert_eq!(result["isError"], json!(true), "{result}");
            let wanted = format!("did not declare {what}");
            assert!(text_of(&result).contains(&wanted), "{result}");
            agent.close();
        }
    }
}

/// The names `search_tools` returned for `query`, best first.
fn found(client: &mut PyClient, query: &str) -> Vec<String> {
    let (result, _) = client.call("search_tools", json!({ "query": query }));
    let text = text_of(&result);
    let body: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{result}"));
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn python_and_typescript_clients_search_and_call_tools_and_reach_a_server_added_later() {
    let env = Env::new();
    env.user_mcp_servers(&[("everything", everything())]);
    let c = env.start(&[]);
    c.wait_for("everything Ready", |s| ready(s, "everything"));
    let mut argv = steward_mcp_argv(&env);
    argv.extend(["--expose".to_owned(), "search".to_owned()]);
    let mut clients = [
        PyClient::stdio(&env, &argv),
        PyClient::typescript(&env, &argv),
    ];
    for client in &mut clients {
        let mut names = client.tool_names();
        names.sort();
        assert_eq!(names, ["call_tool", "search_tools"]);
        let hits = found(client, "add two numbers together");
        assert_eq!(
            hits.first().map(String::as_str),
            Some("everything__get-sum"),
            "{hits:?}"
        );
        let (result, _) = client.call(
            "call_tool",
            json!({"name": "everything__get-sum", "arguments": {"a": 2, "b": 3}}),
        );
        assert!(text_of(&result).contains('5'), "{result}");
    }

    // A server added after both connected: found and called, no re-list.
    let time = common::peer("mcp-server-time", "venv/bin/mcp-server-time");
    env.user_mcp_servers(&[
        ("everything", everything()),
        ("time", json!({"command": time.to_string_lossy()})),
    ]);
    c.wait_for("time Ready", |s| ready(s, "time"));
    for client in &mut clients {
        let hits = found(client, "what time is it now in another timezone");
        assert_eq!(
            hits.first().map(String::as_str),
            Some("time__get_current_time"),
            "{hits:?}"
        );
        let (result, _) = client.call(
            "call_tool",
            json!({"name": "time__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}),
        );
        assert!(text_of(&result).contains("Asia/Tokyo"), "{result}");
    }
    for client in clients {
        client.close();
    }
}

#[test]
fn the_pypi_client_speaks_2026_07_28_and_hears_list_changes_on_its_listen_request() {
    let env = Env::new();
    let time = common::peer("mcp-server-time", "venv/bin/mcp-server-time");
    let time = json!({"command": time.to_string_lossy()});
    env.user_mcp_servers(&[("time", time.clone())]);
    let c = env.start(&[]);
    c.wait_for("time Ready", |s| ready(s, "time"));
    let client = ModernClient::spawn(
        &env,
        "time__get_current_time",
        &json!({"timezone": "Asia/Tokyo"}),
    );
    let next = |what: &str| client.next(what);
    let first = next("first list");
    assert_eq!(first["version"], "2026-07-28", "{first}");
    assert_eq!(
        first["tools"],
        json!(["time__convert_time", "time__get_current_time"])
    );
    let call = next("call");
    assert!(
        call["call"].as_str().unwrap().contains("Asia/Tokyo"),
        "{call}"
    );
    assert_eq!(next("listen")["listening"], true);
    // An edit: the client hears it on its subscriptions/listen request.
    env.user_mcp_servers(&[
        ("time", time),
        ("alpha", env.fake_mcp("alpha", tools(&["echo"]))),
    ]);
    let changed = next("changed list");
    assert_eq!(
        changed["changed"],
        json!([
            "alpha__echo",
            "time__convert_time",
            "time__get_current_time"
        ]),
        "{changed}"
    );
    assert_eq!(changed["events"], 1, "one edit, one event: {changed}");
    let (ok, stderr) = client.finish();
    assert!(ok, "{stderr}");
}

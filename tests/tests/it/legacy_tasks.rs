//! The experimental tasks of protocol 2025-11-25 through Steward, with a
//! real server and a real client on both ends: server-everything's
//! `simulate-research-query` (a tool whose `execution.taskSupport` is
//! "required", in the TypeScript SDK's task store) behind Steward over
//! stdio and over streamable HTTP, and the TypeScript SDK's client
//! (`callToolStream`: `tools/call` with `task`, `tasks/get` polls,
//! `tasks/result`, on which the server elicits) in front of it, over
//! Steward's HTTP endpoint and over `steward mcp`. Task ids reach the agent
//! as `SERVER/ID`, through the union and the one-server view; a task is
//! its maker's alone, and so are the server's `notifications/tasks/status`
//! of it; it outlives the reload of an unrelated server. A missing peer
//! fails.

use serde_json::{Value, json};
use steward_tests::harness::{Env, fake_tools, lists_tool, ready};

use crate::mcp_remote::{everything as everything_http, free_port};
use crate::real_clients::{
    CLIENT_DEADLINE, PyClient, Sdk, everything, http_url, steward_mcp_argv, text_of,
};

const TOOL: &str = "simulate-research-query";

/// `call_tool_stream`'s messages for `tool` with `arguments` (`until`: the
/// message type to stop after).
fn stream(client: &mut PyClient, tool: &str, arguments: Value, until: Option<&str>) -> Vec<Value> {
    let mut command = json!({"op": "call_tool_stream", "name": tool, "arguments": arguments});
    if let Some(until) = until {
        command["until"] = json!(until);
    }
    client.run(command)["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The result at the end of `messages`, which must begin with the task's
/// creation under an id of `server`'s.
fn result_of(server: &str, messages: &[Value]) -> Value {
    let first = messages.first().expect("messages");
    assert_eq!(first["type"], "taskCreated", "{messages:?}");
    let id = first["taskId"].as_str().unwrap();
    assert!(id.starts_with(&format!("{server}/")), "namespaced: {id}");
    let last = messages.last().unwrap();
    assert_eq!(last["type"], "result", "{messages:?}");
    last["result"].clone()
}

/// An agent (TypeScript SDK, answering elicitations as `name`) of the
/// union: research through `server`'s tool, with and without the server
/// asking, and the task methods on a task left running.
fn researches(agent: &mut PyClient, other: &mut PyClient, server: &str, tool: &str) {
    let listed = agent.list("list_tools");
    let definition = listed
        .iter()
        .find(|t| t["name"] == tool)
        .unwrap_or_else(|| panic!("{tool} listed"));
    assert_eq!(
        definition["execution"],
        json!({"taskSupport": "required"}),
        "{definition}"
    );

    let plain = stream(agent, tool, json!({"topic": "rust"}), None);
    let report = text_of(&result_of(server, &plain));
    assert!(report.contains("rust"), "{report}");
    assert!(
        plain.iter().any(|m| m["type"] == "taskStatus"),
        "polled through tasks/get: {plain:?}"
    );

    // The server asks for a clarification on the stream of tasks/result.
    let asked = stream(
        agent,
        tool,
        json!({"topic": "python", "ambiguous": true}),
        None,
    );
    let report = text_of(&result_of(server, &asked));
    assert!(report.contains("Clarification**: A"), "{report}");
    assert!(
        asked.iter().any(|m| m["status"] == "input_required"),
        "{asked:?}"
    );

    // A task left running: got, listed, another agent's to see not, cancelled.
    let made = stream(agent, tool, json!({"topic": "go"}), Some("taskCreated"));
    let id = made[0]["taskId"].as_str().unwrap().to_owned();
    let got = agent.run(json!({"op": "get_task", "taskId": id}));
    assert_eq!(got["taskId"], id.as_str(), "{got}");
    assert_eq!(got["status"], "working", "{got}");
    assert!(got["ttl"].is_number(), "a task of 2025-11-25, whole: {got}");
    let listed = agent.run(json!({"op": "list_tasks"}));
    let ids: Vec<&str> = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    assert!(ids.contains(&id.as_str()), "{listed}");
    let refused = other
        .try_run(json!({"op": "get_task", "taskId": id}))
        .expect_err("another agent's task");
    assert!(refused.contains("unknown task"), "{refused}");
    let listed = other.run(json!({"op": "list_tasks"}));
    assert!(!listed.to_string().contains(&id), "{listed}");
    let cancelled = agent.run(json!({"op": "cancel_task", "taskId": id}));
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["taskId"], id.as_str(), "{cancelled}");
}

#[test]
fn a_real_servers_tasks_of_2025_11_25_pass_through_steward_to_a_real_client() {
    let env = Env::new();
    let port = free_port();
    let _remote = everything_http("streamableHttp", port, &env);
    let other = |tools: &[&str]| env.fake_mcp("other", fake_tools(tools));
    let servers = |other_tools: &[&str]| {
        [
            ("ev", everything()),
            (
                "evh",
                json!({"httpUrl": format!("http://127.0.0.1:{port}/mcp")}),
            ),
            ("other", other(other_tools)),
        ]
    };
    env.user_mcp_servers(&servers(&["o1"]));
    let c = env.start(&["--mcp-listen", "127.0.0.1:0"]);
    let s = c.wait_for_within("ev, evh and other Ready", CLIENT_DEADLINE, |s| {
        ready(s, "ev") && ready(s, "evh") && ready(s, "other")
    });
    let url = http_url(&s);
    let options = ["--elicitation", "--name=A"];
    let http =
        |target: String| PyClient::of(Sdk::TypeScript, &env, &options, &["http".into(), target]);
    let mut over_http = http(url.clone());
    let mut over_stdio = {
        let mut target = vec!["stdio".to_owned()];
        target.extend(steward_mcp_argv(&env));
        PyClient::of(Sdk::TypeScript, &env, &options, &target)
    };
    let union_tool = |server: &str| format!("{server}__{TOOL}");
    researches(&mut over_http, &mut over_stdio, "ev", &union_tool("ev"));
    // The server's status notifications reach the maker of the task only.
    over_http.run(json!({"op": "wait_notification", "method": "notifications/tasks/status"}));
    let heard = over_stdio.run(json!({"op": "notifications"}));
    assert!(
        !heard.to_string().contains("notifications/tasks/status"),
        "{heard}"
    );
    researches(&mut over_http, &mut over_stdio, "evh", &union_tool("evh"));
    researches(&mut over_stdio, &mut over_http, "ev", &union_tool("ev"));
    // The one-server view says the server's own `tasks` capability.
    let mut viewing = http(format!("{url}/evh"));
    researches(&mut viewing, &mut over_http, "evh", TOOL);

    // A task outlives the reload of an unrelated server.
    let made = stream(
        &mut over_http,
        &union_tool("ev"),
        json!({"topic": "zig"}),
        Some("taskCreated"),
    );
    let id = made[0]["taskId"].as_str().unwrap().to_owned();
    env.user_mcp_servers(&servers(&["o1", "o2"]));
    c.wait_for("other reloaded with o2", |s| lists_tool(s, "other", "o2"));
    let result = over_http.run(json!({"op": "task_result", "taskId": id}));
    assert!(text_of(&result).contains("zig"), "{result}");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str(),
        "{result}"
    );
    viewing.close();
    over_http.close();
    over_stdio.close();
}

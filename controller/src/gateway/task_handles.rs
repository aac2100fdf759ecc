//! Task handles (SEP-2663) as agents see them: ids namespaced per server
//! (`SERVER/ID`). [`super::tasks`] routes the task methods by these ids;
//! a server hears per request whether the agent takes tasks
//! ([`super::agent::told`]). The handles of 2025-11-25's experimental tasks
//! too: a call that asks for one goes with its `task` ([`to_upstream`]),
//! the `{task}` answer reaches the agent renamed ([`created`]).

use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, ClientRequest, CreateTaskResult,
    CustomRequest, CustomResult, GetMeta as _, JsonObject, MetaObject, ServerResult,
    TASKS_EXTENSION_ID,
};
use serde_json::{Value, json};

use crate::runtime::mcp::wire;

/// Between the server and its own id in an exposed task id.
const SEPARATOR: char = '/';

/// The id an agent sees for `server`'s task `id`.
pub fn exposed_id(server: &str, id: &str) -> String {
    format!("{server}{SEPARATOR}{id}")
}

/// The server (of `servers`) and its own id behind an exposed task id: the
/// longest server name that prefixes it, so that a name holding the
/// separator still routes right.
pub fn owner<'a, 's>(
    exposed: &'a str,
    servers: impl IntoIterator<Item = &'s str>,
) -> Option<(&'s str, &'a str)> {
    servers
        .into_iter()
        .filter_map(|server| {
            let id = exposed.strip_prefix(server)?.strip_prefix(SEPARATOR)?;
            (!server.is_empty() && !id.is_empty()).then_some((server, id))
        })
        .max_by_key(|(server, _)| server.len())
}

/// `declared` without the tasks extension (a program of code mode takes
/// results, not task handles).
pub fn without_tasks(mut declared: ClientCapabilities) -> ClientCapabilities {
    if let Some(extensions) = &mut declared.extensions {
        extensions.remove(TASKS_EXTENSION_ID);
    }
    declared
}

/// A task handle of `server`'s as the agent sees it.
pub fn exposed(server: &str, mut handle: CreateTaskResult) -> CreateTaskResult {
    handle.task.task_id = exposed_id(server, &handle.task.task_id);
    handle
}

// Task handles of 2025-11-25 ([`super::legacy_tasks`]), which rmcp does
// not type.

/// `request` as the server must see it: a `tools/call` whose agent asked
/// for a task goes with its `task` (rmcp's call has no such field).
pub fn to_upstream(mut request: ClientRequest) -> ClientRequest {
    if !matches!(request, ClientRequest::CallToolRequest(_)) {
        return request;
    }
    let Some(task) = request.get_meta_mut().0.remove(wire::TASK) else {
        return request;
    };
    let meta = request.get_meta().clone();
    let ClientRequest::CallToolRequest(call) = request else {
        unreachable!("matched above")
    };
    let mut params = serde_json::to_value(&call.params).unwrap_or_else(|_| json!({}));
    params["task"] = task;
    let mut custom = CustomRequest::new("tools/call", Some(params));
    *custom.get_meta_mut() = meta;
    ClientRequest::CustomRequest(custom)
}

/// A call's answer that is a task of 2025-11-25 (`{task}`), its id as the
/// agent knows it, carried whole to the agent's transport.
pub fn created(server: &str, result: &ServerResult) -> Option<CallToolResponse> {
    let ServerResult::CustomResult(CustomResult(raw)) = result else {
        return None;
    };
    let mut raw = raw.clone();
    let id = raw.pointer_mut("/task/taskId")?;
    *id = exposed_id(server, id.as_str()?).into();
    Some(CallToolResponse::Complete(carried(raw)))
}

/// A result rmcp cannot type, carried whole ([`wire::RESULT`]).
fn carried(raw: Value) -> CallToolResult {
    let mut result = CallToolResult::default();
    result.result_type = None;
    let mut meta = JsonObject::new();
    meta.insert(wire::RESULT.to_owned(), raw);
    result.meta = Some(MetaObject(meta));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_ids_name_their_server_and_lead_back_to_it() {
        let id = exposed_id("github", "task/7");
        assert_eq!(id, "github/task/7");
        assert_eq!(owner(&id, ["git", "github"]), Some(("github", "task/7")));
        // A name holding the separator: the longest name wins.
        let nested = exposed_id("team/tools", "1");
        assert_eq!(
            owner(&nested, ["team", "team/tools"]),
            Some(("team/tools", "1"))
        );
        assert_eq!(
            owner(&exposed_id("team", "x/1"), ["team", "team/tools"]),
            Some(("team", "x/1"))
        );
        assert_eq!(owner("no-separator", ["no-separator"]), None);
        assert_eq!(owner("github/", ["github"]), None);
        assert_eq!(owner("other/7", ["github"]), None);
    }

    #[test]
    fn a_call_asking_for_a_task_goes_with_it() {
        let mut call = rmcp::model::CallToolRequestParams::new("research");
        call.arguments = json!({"topic": "x"}).as_object().cloned();
        let mut request = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(call));
        request
            .get_meta_mut()
            .0
            .insert(wire::TASK.to_owned(), json!({"ttl": 1000}));
        let ClientRequest::CustomRequest(sent) = to_upstream(request) else {
            panic!("not sent with its task")
        };
        assert_eq!(sent.method, "tools/call");
        let params = sent.params.clone().unwrap();
        assert_eq!(params["task"], json!({"ttl": 1000}));
        assert_eq!(params["arguments"], json!({"topic": "x"}));
        assert!(!sent.get_meta().0.contains_key(wire::TASK));
    }

    #[test]
    fn a_task_of_2025_11_25_is_named_as_the_agent_knows_it() {
        let made = ServerResult::CustomResult(CustomResult(
            json!({"task": {"taskId": "7", "status": "working", "ttl": null}}),
        ));
        let Some(CallToolResponse::Complete(carried)) = created("research", &made) else {
            panic!("not a task")
        };
        let raw = &carried.meta.unwrap().0[wire::RESULT];
        assert_eq!(raw["task"]["taskId"], "research/7");
    }

    #[test]
    fn code_mode_takes_no_tasks() {
        let declared = ClientCapabilities::builder().enable_tasks().build();
        assert!(declared.supports_tasks());
        assert!(!without_tasks(declared).supports_tasks());
    }
}

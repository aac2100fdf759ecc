//! The experimental tasks of protocol 2025-11-25 through Steward (the
//! tasks extension of 2026-07-28 is [`super::tasks`]): a tool says
//! `execution.taskSupport`, an agent's `tools/call` with `task` is
//! answered `{task}` at once, and the agent polls `tasks/get`, fetches
//! the result with `tasks/result` (a blocking request, on which the server
//! asks the agent what it needs), lists its tasks with `tasks/list` and
//! may `tasks/cancel`. rmcp types none of it; the fields ride the private
//! keys of [`wire`], and the requests go as they came.
//!
//! - Task ids are namespaced per server (`SERVER/ID`) as in
//!   [`super::task_handles`], routed the same way, and a task made for an
//!   agent's call is that agent's alone; its `notifications/tasks/status`
//!   reach that agent only, renamed.
//! - An agent of 2025-11-25 is told the `tasks` capability (tools/call,
//!   list, cancel); its `tasks/get` and `tasks/cancel`, which rmcp reads
//!   as the extension's, arrive renamed ([`GET`], [`CANCEL`]) by the
//!   agent's transport ([`super::agent_wire`]). A call's `task` and its
//!   `{task}` answer are [`super::task_handles::to_upstream`] and
//!   [`super::task_handles::created`].

use rmcp::model::{
    ClientRequest, CustomRequest, CustomResult, ErrorData, GetMeta as _, JsonObject, ServerResult,
};
use serde_json::{Value, json};

use super::Gateway;
use super::call::{Origin, call_error, forward, upstream_meta};
use super::profile::Naming;
use super::task_handles::exposed_id;
use super::tasks::holds;
use crate::runtime::mcp::wire;

/// `tasks/get` of an agent of 2025-11-25, as its transport renames it.
pub const GET: &str = "dev.steward/tasks/get";
/// `tasks/cancel` of an agent of 2025-11-25, as its transport renames it.
pub const CANCEL: &str = "dev.steward/tasks/cancel";
/// The methods of the experimental tasks an agent sends (renamed or not).
pub const METHODS: [&str; 4] = [GET, CANCEL, "tasks/result", "tasks/list"];

/// The `tasks` capability of 2025-11-25 Steward tells such an agent.
pub fn capability() -> JsonObject {
    let tasks = json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
    tasks.as_object().cloned().unwrap_or_default()
}

impl Gateway {
    /// One of [`METHODS`] of `origin`'s agent: by the task id to the server
    /// it names, or (`tasks/list`) to every server of `naming` with a tool
    /// that takes tasks. Answers what the server answered, ids renamed.
    pub async fn legacy_task_request(
        &self,
        method: &str,
        params: Option<Value>,
        naming: Naming<'_>,
        origin: &Origin,
    ) -> Result<Value, ErrorData> {
        let method = match method {
            GET => "tasks/get",
            CANCEL => "tasks/cancel",
            "tasks/list" => return Ok(self.legacy_task_list(naming, origin).await),
            other => other,
        };
        let mut params = params.unwrap_or_else(|| json!({}));
        let exposed = params
            .get("taskId")
            .and_then(Value::as_str)
            .ok_or_else(|| ErrorData::invalid_params(format!("{method} needs a taskId"), None))?
            .to_owned();
        let (up, id) = self.task_upstream(&exposed, naming, origin).await?;
        params["taskId"] = id.into();
        let answer = self.send_legacy(&up, method, params, origin).await?;
        Ok(renamed(answer, &up.server, true))
    }

    async fn send_legacy(
        &self,
        up: &super::registry::Upstream,
        method: &str,
        mut params: Value,
        origin: &Origin,
    ) -> Result<Value, ErrorData> {
        if let Some(object) = params.as_object_mut() {
            object.remove("_meta");
        }
        let mut request = CustomRequest::new(method, Some(params));
        if let Some(meta) = upstream_meta(origin, false) {
            *request.get_meta_mut() = meta;
        }
        let progress = origin.meta.get_progress_token();
        // `tasks/result` waits for the task: as long as a call may.
        let idle = self.tool_idle();
        let answer = forward(
            up,
            ClientRequest::CustomRequest(request),
            origin,
            progress,
            idle,
        )
        .await
        .map_err(|e| call_error(&up.server, e))?;
        Ok(match answer {
            ServerResult::CustomResult(CustomResult(raw)) => raw,
            other => serde_json::to_value(&other).unwrap_or_else(|_| json!({})),
        })
    }

    /// `tasks/list`: the tasks of every server of `naming` that has a tool
    /// taking tasks, but those another agent holds.
    async fn legacy_task_list(&self, naming: Naming<'_>, origin: &Origin) -> Value {
        let mut tasks = Vec::new();
        for up in self.registry.all_live() {
            if matches!(naming, Naming::Own(server) if server != up.server) {
                continue;
            }
            if !up
                .catalog
                .tools
                .iter()
                .any(|t| wire::task_support(t).is_some())
            {
                continue;
            }
            let listed = match self.send_legacy(&up, "tasks/list", json!({}), origin).await {
                Ok(listed) => listed,
                Err(error) => {
                    tracing::debug!(server = %up.server, error = %error.message, "tasks/list");
                    continue;
                }
            };
            let listed = listed.get("tasks").and_then(Value::as_array).cloned();
            for task in listed.into_iter().flatten() {
                let Some(id) = task.get("taskId").and_then(Value::as_str) else {
                    continue;
                };
                if holds(&up, id, origin) {
                    tasks.push(renamed(task, &up.server, false));
                }
            }
        }
        json!({"tasks": tasks})
    }
}

/// `answer` with `server`'s task ids as the agent knows them: a task's own
/// (`taskId`, carried whole when rmcp could not type it) and, `related`,
/// the one a `tasks/result` names in its `_meta`.
fn renamed(answer: Value, server: &str, related: bool) -> Value {
    let mut answer = match answer {
        Value::Object(mut object) => {
            let whole = object
                .get_mut("_meta")
                .and_then(Value::as_object_mut)
                .and_then(|meta| meta.remove(wire::RESULT));
            whole.unwrap_or(Value::Object(object))
        }
        other => other,
    };
    let rename = |id: &mut Value| {
        if let Some(own) = id.as_str() {
            *id = exposed_id(server, own).into();
        }
    };
    if let Some(id) = answer.get_mut("taskId") {
        rename(id);
    }
    if related
        && let Some(id) = answer.pointer_mut("/_meta/io.modelcontextprotocol~1related-task/taskId")
    {
        rename(id);
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_name_tasks_as_the_agent_knows_them() {
        let got = json!({"_meta": {wire::RESULT: {"taskId": "7", "ttl": 5}}});
        assert_eq!(renamed(got, "s", true), json!({"taskId": "s/7", "ttl": 5}));
        let result = json!({"content": [], "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "7"}}});
        assert_eq!(
            renamed(result, "s", true)["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
            "s/7"
        );
    }
}

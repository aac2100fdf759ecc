//! The tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) through
//! Steward: a server may answer an agent's `tools/call` with a task handle
//! instead of a result; the agent then polls `tasks/get` (the result comes
//! inlined once the task ends), answers the task's input requests with
//! `tasks/update` and may `tasks/cancel` it.
//!
//! - A server hears that the agent takes tasks exactly when the agent said
//!   so: a request of 2026-07-28 carries the agent's own capabilities; on a
//!   session of the initialize lifecycle (whose `initialize` declares no
//!   tasks, since not every agent takes them) the request opts in on its
//!   own (`_meta` client capabilities, SEP-2575).
//! - The agent sees task ids namespaced per server (`SERVER/ID`, see
//!   [`super::task_handles`]); `tasks/*` go to the server the id names, whatever
//!   else restarts meanwhile. A one-server view serves only its server's.
//!   A task made for the call of an agent with a session is that agent's
//!   alone (another agent hears of no such task); a request of 2026-07-28
//!   has no session to hold one, so its tasks are anyone's who knows the id.
//! - A task's status notification (`notifications/tasks`) on the server's
//!   session goes to the agent whose call made the task, on its session,
//!   with the id it knows (the relay keeps who made which task); a
//!   2026-07-28 agent, which has no session, polls.

use rmcp::model::{
    CancelTaskParams, CancelTaskRequest, ClientRequest, ErrorData, GetTaskParams, GetTaskRequest,
    GetTaskResult, RequestMetaObject, ServerResult, UpdateTaskParams, UpdateTaskRequest,
};

use std::sync::Arc;

use super::Gateway;
use super::call::{Origin, call_error, forward, native, unexpected, upstream_meta};
use super::profile::Naming;
use super::registry::Upstream;
use super::task_handles::owner;

pub fn unknown(exposed: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "unknown task {exposed:?} (Steward's task ids are SERVER/ID, as tools/call gave them)"
        ),
        None,
    )
}

/// One of the task methods, with the server's own id in place.
pub enum TaskRequest {
    Get(GetTaskParams),
    Update(UpdateTaskParams),
    Cancel(CancelTaskParams),
}

impl TaskRequest {
    fn task_id(&mut self) -> &mut String {
        match self {
            TaskRequest::Get(p) => &mut p.task_id,
            TaskRequest::Update(p) => &mut p.task_id,
            TaskRequest::Cancel(p) => &mut p.task_id,
        }
    }

    fn into_request(self, meta: Option<RequestMetaObject>) -> ClientRequest {
        match self {
            TaskRequest::Get(mut p) => {
                p.meta = meta;
                ClientRequest::GetTaskRequest(GetTaskRequest::new(p))
            }
            TaskRequest::Update(mut p) => {
                p.meta = meta;
                ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(p))
            }
            TaskRequest::Cancel(mut p) => {
                p.meta = meta;
                ClientRequest::CancelTaskRequest(CancelTaskRequest::new(p))
            }
        }
    }
}

impl Gateway {
    /// Forward a task method of `origin`'s to the server its task id names
    /// (as `naming` sees servers), waiting while that server (re)starts.
    /// Answers what the server answered, with the id as the agent knows it.
    pub async fn task_request(
        &self,
        mut request: TaskRequest,
        naming: Naming<'_>,
        origin: &Origin,
    ) -> Result<ServerResult, ErrorData> {
        let exposed = request.task_id().clone();
        let (up, id) = self.task_upstream(&exposed, naming, origin).await?;
        *request.task_id() = id;
        let native = native(&origin.meta, &up);
        let request = request.into_request(upstream_meta(origin, native));
        let progress = origin.meta.get_progress_token();
        match forward(&up, request, origin, progress, None).await {
            Ok(ServerResult::GetTaskResult(mut result)) => {
                result.task.task.task_id = exposed;
                Ok(ServerResult::GetTaskResult(result))
            }
            Ok(ack @ (ServerResult::TaskAckResult(_) | ServerResult::EmptyResult(_))) => Ok(ack),
            Ok(_) => Err(unexpected(&up.server, "a task request")),
            Err(e) => Err(call_error(&up.server, e)),
        }
    }

    /// The live connection of the server task id `exposed` names (of the
    /// servers `naming` sees, waiting while it (re)starts) and the server's
    /// own id. A task made for the call of an agent with a session is that
    /// agent's: to another agent there is no such task.
    pub async fn task_upstream(
        &self,
        exposed: &str,
        naming: Naming<'_>,
        origin: &Origin,
    ) -> Result<(Arc<Upstream>, String), ErrorData> {
        // Its server: in a one-server view only that one; else any server
        // of the configuration.
        let servers: Vec<String> = match naming {
            Naming::Own(server) => vec![server.to_owned()],
            Naming::Prefixed(_) => self.store.snapshot().desired.mcp.keys().cloned().collect(),
        };
        let Some((server, id)) = owner(exposed, servers.iter().map(String::as_str)) else {
            return Err(unknown(exposed));
        };
        let up = self
            .upstream_of(server)
            .await
            .map_err(|why| ErrorData::invalid_params(format!("task {exposed:?}: {why}"), None))?;
        if !holds(&up, id, origin) {
            return Err(unknown(exposed));
        }
        Ok((up, id.to_owned()))
    }
}

/// Whether the agent of `origin` may use `up`'s task `id`: it is not
/// another agent's.
pub fn holds(up: &Upstream, id: &str, origin: &Origin) -> bool {
    let held = up.handle.relay().task_owner(id);
    held.and_then(|maker| maker.task_holder())
        .is_none_or(|holder| holder == origin.agent.id)
}

/// `tasks/get`'s answer, from what [`Gateway::task_request`] answered.
pub fn got(result: ServerResult) -> Result<GetTaskResult, ErrorData> {
    match result {
        ServerResult::GetTaskResult(r) => Ok(r),
        _ => Err(unexpected("the server", "tasks/get")),
    }
}

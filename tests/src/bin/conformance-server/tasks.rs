//! The tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`): the
//! fixtures the suite's `tasks-*` scenarios call, and the store behind
//! `tasks/get`, `tasks/update` and `tasks/cancel`.
//!
//! A task-supporting tool called by a client that declared the extension
//! (for the session, or per request in `_meta`) answers with a task handle
//! at once and runs on; without the declaration an optional one runs to
//! its end and answers as usual, a required one is refused with -32021.
//! Tasks are shared by every session of the process, as a server's store
//! would be: a task made on one session can be cancelled from another.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    CreateTaskResult, DetailedTask, ErrorData, GetTaskParams, GetTaskResult, InputRequest,
    InputRequests, JsonObject, ServerNotification, Task, TaskPayload, TaskStatusNotification,
    TaskStatusNotificationParams, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{asks, lock, string_arg, text};

/// How long a task is kept, and how often to poll it.
const TTL_MS: u64 = 10 * 60 * 1000;
const POLL_MS: u64 = 200;

/// Where a task stands.
#[derive(Clone)]
enum State {
    Working,
    Input(BTreeMap<String, Value>),
    Completed(CallToolResult),
    Failed(ErrorData),
    Cancelled,
}

struct Entry {
    created_at: String,
    updated_at: String,
    /// The session of the initialize lifecycle that made it: told of each
    /// status (`notifications/tasks`).
    watcher: Option<Peer<RoleServer>>,
    state: State,
    /// Answers to its input requests, by key, not yet taken by the task.
    answers: BTreeMap<String, Value>,
}

/// Every task of the process (see the module doc).
#[derive(Default)]
pub struct Tasks {
    entries: Mutex<HashMap<String, Entry>>,
    /// Wakes the running tasks when an answer or a cancellation comes.
    changed: Notify,
    /// The queue of statuses to tell, in order (started by the first).
    told: std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<(Peer<RoleServer>, DetailedTask)>>,
    next: AtomicU64,
}

/// What a task-supporting tool does once it runs.
enum Job {
    Compute { seconds: u64, label: String },
    Fail,
    ProtocolError,
    Confirm { filename: String },
    MultiInput,
    Greet { name: String },
}

/// The task-supporting tools: whether each requires a task.
fn task_tool(name: &str) -> Option<bool> {
    match name {
        "slow_compute" | "protocol_error_job" => Some(false),
        "failing_job" | "confirm_delete" | "multi_input" | "test_tool_with_task" => Some(true),
        _ => None,
    }
}

fn declared(context: &RequestContext<RoleServer>) -> bool {
    asks::capabilities(context).is_some_and(|c| c.supports_tasks())
}

fn now() -> String {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown task {id:?}"), Some(json!({"taskId": id})))
}

fn as_object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

fn confirm_request(message: &str) -> Value {
    asks::elicit(
        message,
        json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}),
    )
}

fn name_request() -> Value {
    asks::elicit(
        "What is your name?",
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
    )
}

/// What an elicitation answer accepted, if it did.
fn accepted(answer: &Value) -> Option<&JsonObject> {
    (answer.get("action").and_then(Value::as_str) == Some("accept"))
        .then(|| answer.get("content").and_then(Value::as_object))
        .flatten()
}

impl Job {
    /// How the job ends, given what the task was answered (`ask` parks the
    /// task for input and waits for every answer; `None` when cancelled).
    async fn run(self, tasks: &Tasks, id: &str) -> Option<State> {
        match self {
            Job::Compute { seconds, label } => {
                tasks.wait(id, Duration::from_secs(seconds)).await?;
                Some(State::Completed(CallToolResult::success(vec![text(
                    format!("computed {label} in {seconds}s"),
                )])))
            }
            Job::Fail => {
                tasks.wait(id, Duration::from_secs(1)).await?;
                Some(State::Completed(CallToolResult::error(vec![text(
                    "failing_job failed, as it always does",
                )])))
            }
            Job::ProtocolError => {
                tasks.wait(id, Duration::from_millis(300)).await?;
                Some(State::Failed(ErrorData::internal_error(
                    "protocol_error_job broke down, as it always does",
                    None,
                )))
            }
            Job::Confirm { filename } => {
                let mut asked = BTreeMap::new();
                asked.insert(
                    "confirm".to_owned(),
                    confirm_request(&format!("Delete {filename}?")),
                );
                let answers = tasks.ask(id, asked).await?;
                let yes = accepted(&answers["confirm"])
                    .and_then(|c| c.get("confirm"))
                    .and_then(Value::as_bool)
                    == Some(true);
                let said = if yes { "deleted" } else { "kept" };
                Some(State::Completed(CallToolResult::success(vec![text(
                    format!("{said} {filename}"),
                )])))
            }
            Job::MultiInput => {
                let mut asked = BTreeMap::new();
                asked.insert("name".to_owned(), name_request());
                asked.insert("confirm".to_owned(), confirm_request("Go on?"));
                let answers = tasks.ask(id, asked).await?;
                let name = accepted(&answers["name"])
                    .and_then(|c| c.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("nobody")
                    .to_owned();
                Some(State::Completed(CallToolResult::success(vec![text(
                    format!("both answered, by {name}"),
                )])))
            }
            Job::Greet { name } => Some(State::Completed(CallToolResult::success(vec![text(
                format!("Hello, {name}!"),
            )]))),
        }
    }
}

impl Tasks {
    /// A `tools/call` of a task-supporting tool (`None` for other tools).
    pub async fn call(
        self: &Arc<Self>,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        let required = task_tool(&request.name)?;
        let args = request.arguments.clone().unwrap_or_default();
        let arg = |name: &str| string_arg(request, name);
        if required && !declared(context) {
            return Some(Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            )));
        }
        let job = match request.name.as_ref() {
            "slow_compute" => Job::Compute {
                seconds: args.get("seconds").and_then(Value::as_u64).unwrap_or(0),
                label: arg("label"),
            },
            "failing_job" => Job::Fail,
            "protocol_error_job" => Job::ProtocolError,
            "confirm_delete" => Job::Confirm {
                filename: arg("filename"),
            },
            "multi_input" => Job::MultiInput,
            _ => {
                // test_tool_with_task: the name first (SEP-2322), then a task.
                let answer = request
                    .input_responses
                    .as_ref()
                    .and_then(|r| r.get("user_name"));
                match answer.and_then(accepted).and_then(|c| c.get("name")) {
                    Some(name) => Job::Greet {
                        name: name.as_str().unwrap_or_default().to_owned(),
                    },
                    None => {
                        let asked = ("user_name".to_owned(), name_request());
                        return Some(
                            asks::requests(&[&asked], None).map(CallToolResponse::InputRequired),
                        );
                    }
                }
            }
        };
        if !declared(context) {
            // An optional task tool runs to its end for this client.
            let id = self.create(None);
            let ended = job.run(self, &id).await;
            lock(&self.entries).remove(&id);
            return Some(match ended {
                Some(State::Completed(result)) => Ok(CallToolResponse::Complete(result)),
                Some(State::Failed(error)) => Err(error),
                _ => Err(ErrorData::internal_error("the call ended unanswered", None)),
            });
        }
        let watcher = (!asks::modern(context)).then(|| context.peer.clone());
        let id = self.create(watcher);
        let task = self.task(&id).expect("just created").task;
        tokio::spawn({
            let tasks = self.clone();
            async move {
                if let Some(end) = job.run(&tasks, &id).await {
                    tasks.set(&id, end);
                }
            }
        });
        Some(Ok(CallToolResponse::Task(CreateTaskResult::new(task))))
    }

    /// A new working task, stored before its handle goes out (a `tasks/get`
    /// right after finds it).
    fn create(&self, watcher: Option<Peer<RoleServer>>) -> String {
        let id = format!("task-{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let stamp = now();
        let entry = Entry {
            created_at: stamp.clone(),
            updated_at: stamp,
            watcher,
            state: State::Working,
            answers: BTreeMap::new(),
        };
        lock(&self.entries).insert(id.clone(), entry);
        id
    }

    /// Move task `id` to `state`, unless it already ended (a cancelled
    /// task stays cancelled).
    fn set(&self, id: &str, state: State) {
        {
            let mut entries = lock(&self.entries);
            let Some(entry) = entries.get_mut(id) else {
                return;
            };
            if matches!(
                entry.state,
                State::Completed(_) | State::Failed(_) | State::Cancelled
            ) {
                return;
            }
            entry.state = state;
            entry.updated_at = now();
        }
        self.tell(id);
    }

    /// Tell the session that made task `id` where it stands now.
    fn tell(&self, id: &str) {
        let watcher = lock(&self.entries).get(id).and_then(|e| e.watcher.clone());
        let (Some(peer), Some(task)) = (watcher, self.task(id)) else {
            return;
        };
        let queue = self.told.get_or_init(|| {
            let (queue, mut statuses) =
                tokio::sync::mpsc::unbounded_channel::<(Peer<RoleServer>, DetailedTask)>();
            tokio::spawn(async move {
                while let Some((peer, task)) = statuses.recv().await {
                    let status =
                        TaskStatusNotification::new(TaskStatusNotificationParams::new(task));
                    let _ = peer
                        .send_notification(ServerNotification::TaskStatusNotification(status))
                        .await;
                }
            });
            queue
        });
        let _ = queue.send((peer, task));
    }

    fn cancelled(&self, id: &str) -> bool {
        lock(&self.entries)
            .get(id)
            .is_none_or(|e| matches!(e.state, State::Cancelled))
    }

    /// Wait `for_` unless the task is cancelled first (`None`).
    async fn wait(&self, id: &str, for_: Duration) -> Option<()> {
        let deadline = tokio::time::Instant::now() + for_;
        loop {
            let changed = self.changed.notified();
            if self.cancelled(id) {
                return None;
            }
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => return Some(()),
                () = changed => {}
            }
        }
    }

    /// Park the task for `asked` and wait until every key is answered
    /// (`None` when it is cancelled first).
    async fn ask(
        &self,
        id: &str,
        asked: BTreeMap<String, Value>,
    ) -> Option<BTreeMap<String, Value>> {
        self.set(id, State::Input(asked.clone()));
        loop {
            let changed = self.changed.notified();
            {
                let mut entries = lock(&self.entries);
                let entry = entries.get_mut(id)?;
                match &entry.state {
                    State::Cancelled => return None,
                    State::Input(pending) if pending.is_empty() => {
                        entry.state = State::Working;
                        entry.updated_at = now();
                        return Some(std::mem::take(&mut entry.answers));
                    }
                    _ => {}
                }
            }
            changed.await;
        }
    }

    fn task(&self, id: &str) -> Option<DetailedTask> {
        let entries = lock(&self.entries);
        let entry = entries.get(id)?;
        let payload = match &entry.state {
            State::Working => TaskPayload::Working,
            State::Input(pending) => TaskPayload::InputRequired {
                input_requests: pending
                    .iter()
                    .filter_map(|(k, v)| {
                        serde_json::from_value::<InputRequest>(v.clone())
                            .ok()
                            .map(|r| (k.clone(), r))
                    })
                    .collect::<InputRequests>(),
            },
            State::Completed(result) => TaskPayload::Completed {
                result: as_object(serde_json::to_value(result).unwrap_or_default()),
            },
            State::Failed(error) => TaskPayload::Failed {
                error: as_object(serde_json::to_value(error).unwrap_or_default()),
            },
            State::Cancelled => TaskPayload::Cancelled,
        };
        let task = Task::new(id, payload.status(), &entry.created_at, &entry.updated_at)
            .with_ttl_ms(TTL_MS)
            .with_poll_interval_ms(POLL_MS);
        Some(DetailedTask::new(task, payload))
    }

    pub fn get(&self, request: GetTaskParams) -> Result<GetTaskResult, ErrorData> {
        self.task(&request.task_id)
            .map(GetTaskResult::new)
            .ok_or_else(|| unknown(&request.task_id))
    }

    /// Answers to some or all of a task's pending requests: each answered
    /// key leaves `inputRequests`.
    pub fn update(&self, request: UpdateTaskParams) -> Result<(), ErrorData> {
        {
            let mut entries = lock(&self.entries);
            let entry = entries
                .get_mut(&request.task_id)
                .ok_or_else(|| unknown(&request.task_id))?;
            if let State::Input(pending) = &mut entry.state {
                for (key, answer) in request.input_responses {
                    if pending.remove(&key).is_some() {
                        entry.answers.insert(key, answer);
                    }
                }
                entry.updated_at = now();
            }
        }
        self.changed.notify_waiters();
        Ok(())
    }

    /// Cancel a task that has not ended; one that has is left as it is
    /// (the same empty acknowledgement).
    pub fn cancel(&self, request: CancelTaskParams) -> Result<(), ErrorData> {
        if !lock(&self.entries).contains_key(&request.task_id) {
            return Err(unknown(&request.task_id));
        }
        self.set(&request.task_id, State::Cancelled);
        self.changed.notify_waiters();
        Ok(())
    }
}

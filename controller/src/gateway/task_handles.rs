//! Task handles (SEP-2663) as agents see them: ids namespaced per server
//! (`SERVER/ID`). [`super::tasks`] routes the task methods by these ids;
//! a server hears per request whether the agent takes tasks
//! ([`super::agent::told`]).

use rmcp::model::{ClientCapabilities, CreateTaskResult, TASKS_EXTENSION_ID};

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
    fn code_mode_takes_no_tasks() {
        let declared = ClientCapabilities::builder().enable_tasks().build();
        assert!(declared.supports_tasks());
        assert!(!without_tasks(declared).supports_tasks());
    }
}

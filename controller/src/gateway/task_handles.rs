//! Task handles (SEP-2663) as agents see them: ids namespaced per server
//! (`SERVER/ID`), whether an agent takes tasks, and how a request on a
//! server's session says so for itself. [`super::tasks`] routes the task
//! methods by these ids.

use rmcp::RoleServer;
use rmcp::model::{CreateTaskResult, RequestMetaObject, TASKS_EXTENSION_ID};
use rmcp::service::RequestContext;

use crate::runtime::mcp::session_capabilities;

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

/// Whether the agent of `context`'s request takes tasks (for its session,
/// or for this request in its `_meta`).
pub fn declared(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .is_some_and(|c| c.supports_tasks())
}

/// The `_meta` a request forwarded on a session of the initialize
/// lifecycle carries to say, for this request only, that its agent takes
/// tasks: what the session declared, and the extension.
pub fn opt_in(meta: &mut Option<RequestMetaObject>) {
    let mut capabilities = session_capabilities();
    capabilities
        .extensions
        .get_or_insert_with(Default::default)
        .insert(TASKS_EXTENSION_ID.to_owned(), Default::default());
    meta.get_or_insert_with(RequestMetaObject::default)
        .set_client_capabilities(capabilities);
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
    fn an_opt_in_keeps_what_the_session_declared_and_adds_tasks() {
        let mut meta = None;
        opt_in(&mut meta);
        let caps = meta
            .and_then(|m| m.client_capabilities())
            .expect("declared");
        assert!(caps.supports_tasks());
        assert!(caps.elicitation.is_some() && caps.sampling.is_some() && caps.roots.is_some());
    }
}

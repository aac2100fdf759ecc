//! What the wire says that rmcp's types cannot carry: the experimental
//! tasks of protocol 2025-11-25 (a tool's `execution`, a `tools/call`'s
//! `task`, the `tasks` capability, the task results). rmcp models only the
//! tasks extension of 2026-07-28, and its typed messages drop these fields
//! on parse, so they are moved into a private key of a field rmcp keeps
//! (`_meta`, `experimental`) when a message is read off the wire
//! ([`to_typed`]), and back where the protocol has them when one is written
//! ([`to_wire`]). Both sides of Steward use the same pair: a server's tool
//! comes in with `execution` and reaches the agent with it, an agent's
//! `task` reaches the server as `task`.
//!
//! A message without the markers costs one substring search; only one that
//! has them is parsed.

use serde_json::{Map, Value};

/// `params.task` of a `tools/call`, carried in the request's `_meta`.
pub const TASK: &str = "dev.steward/task";
/// A tool's `execution`, carried in the tool's `_meta`.
pub const EXECUTION: &str = "dev.steward/execution";
/// `capabilities.tasks`, carried in `capabilities.experimental`.
pub const TASKS: &str = "dev.steward/tasks";
/// A whole result rmcp cannot type, carried in a result's `_meta`: it
/// replaces that result on the wire.
pub const RESULT: &str = "dev.steward/result";

const PREFIX: &[u8] = b"dev.steward/";

/// Whether `line` may hold something [`to_typed`] moves.
pub fn may_need_typing(line: &[u8]) -> bool {
    let find = |needle: &[u8]| memchr::memmem::find(line, needle).is_some();
    find(b"\"task") || find(b"\"execution\"") || find(PREFIX)
}

/// Whether `line` may hold something [`to_wire`] moves.
pub fn may_need_wire(line: &[u8]) -> bool {
    memchr::memmem::find(line, PREFIX).is_some()
}

/// `line` (one JSON-RPC message) as rmcp can read it whole, or `None` when
/// nothing in it needs moving.
pub fn typed_line(line: &[u8]) -> Option<Vec<u8>> {
    rewrite(line, may_need_typing, to_typed)
}

/// `line` (one JSON-RPC message rmcp wrote) as the protocol has it, or
/// `None` when nothing in it needs moving.
pub fn wire_line(line: &[u8]) -> Option<Vec<u8>> {
    rewrite(line, may_need_wire, to_wire)
}

fn rewrite(line: &[u8], may: fn(&[u8]) -> bool, apply: fn(&mut Value) -> bool) -> Option<Vec<u8>> {
    if !may(line) {
        return None;
    }
    let mut message: Value = serde_json::from_slice(line).ok()?;
    apply(&mut message).then(|| serde_json::to_vec(&message).ok())?
}

/// Moves what rmcp would drop from `message` (as read off the wire) into
/// the private keys; `true` when anything moved. A private key the peer
/// sent itself in a result's `_meta` is dropped: only Steward replaces a
/// result.
pub fn to_typed(message: &mut Value) -> bool {
    let mut moved = false;
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if method.as_deref() == Some("tools/call")
        && let Some(params) = message.get_mut("params").and_then(Value::as_object_mut)
        && let Some(task) = params.remove("task")
    {
        meta_of(params).insert(TASK.to_owned(), task);
        moved = true;
    }
    let Some(result) = message.get_mut("result").and_then(Value::as_object_mut) else {
        return moved;
    };
    if let Some(meta) = result.get_mut("_meta").and_then(Value::as_object_mut) {
        moved |= meta.remove(RESULT).is_some();
    }
    if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
        for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(execution) = tool.remove("execution") {
                meta_of(tool).insert(EXECUTION.to_owned(), execution);
                moved = true;
            }
        }
    }
    if let Some(capabilities) = result
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
        && let Some(tasks) = capabilities.remove("tasks")
    {
        let experimental = capabilities
            .entry("experimental")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(experimental) = experimental.as_object_mut() {
            experimental.insert(TASKS.to_owned(), tasks);
            moved = true;
        }
    }
    // A task of 2025-11-25 (`tasks/get`, `tasks/cancel`) would be read as
    // one of 2026-07-28, its `ttl` and `pollInterval` lost: kept whole.
    if result.contains_key("taskId")
        && result.contains_key("ttl")
        && !result.contains_key("resultType")
    {
        let whole = Value::Object(std::mem::take(result));
        meta_of(result).insert(RESULT.to_owned(), whole);
        moved = true;
    }
    moved
}

/// Moves what [`to_typed`] carried back where the protocol has it; `true`
/// when anything moved.
pub fn to_wire(message: &mut Value) -> bool {
    let mut moved = false;
    if let Some(params) = message.get_mut("params").and_then(Value::as_object_mut)
        && let Some(task) = take_meta(params, TASK)
    {
        params.insert("task".to_owned(), task);
        moved = true;
    }
    let Some(result) = message.get_mut("result") else {
        return moved;
    };
    if let Some(whole) = result.as_object_mut().and_then(|r| take_meta(r, RESULT)) {
        *result = whole;
        return true;
    }
    let Some(result) = result.as_object_mut() else {
        return moved;
    };
    if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
        for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(execution) = take_meta(tool, EXECUTION) {
                tool.insert("execution".to_owned(), execution);
                moved = true;
            }
        }
    }
    if let Some(capabilities) = result
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
        && let Some(experimental) = capabilities
            .get_mut("experimental")
            .and_then(Value::as_object_mut)
        && let Some(tasks) = experimental.remove(TASKS)
    {
        if experimental.is_empty() {
            capabilities.remove("experimental");
        }
        capabilities.insert("tasks".to_owned(), tasks);
        moved = true;
    }
    moved
}

/// The `_meta` object of `object`, made when missing.
fn meta_of(object: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let meta = object
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("made an object")
}

/// `key` taken out of `object`'s `_meta` (an emptied `_meta` goes too).
fn take_meta(object: &mut Map<String, Value>, key: &str) -> Option<Value> {
    let meta = object.get_mut("_meta")?.as_object_mut()?;
    let value = meta.remove(key)?;
    if meta.is_empty() {
        object.remove("_meta");
    }
    Some(value)
}

/// A tool's `execution.taskSupport` of 2025-11-25 as carried in its
/// `_meta`: `"optional"` or `"required"` when it takes tasks.
pub fn task_support(tool: &rmcp::model::Tool) -> Option<&str> {
    let support = tool
        .meta
        .as_ref()?
        .0
        .get(EXECUTION)?
        .get("taskSupport")?
        .as_str()?;
    matches!(support, "optional" | "required").then_some(support)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(wire: Value) -> Value {
        let mut typed = wire.clone();
        assert!(to_typed(&mut typed), "nothing moved in {wire}");
        let mut back = typed;
        assert!(to_wire(&mut back));
        back
    }

    #[test]
    fn tools_keep_their_execution_through_rmcp() {
        let wire = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [
            {"name": "research", "inputSchema": {"type": "object"},
             "execution": {"taskSupport": "required"}},
            {"name": "plain", "inputSchema": {"type": "object"}, "_meta": {"x": 1}},
        ]}});
        let mut typed = wire.clone();
        to_typed(&mut typed);
        let parsed: rmcp::model::ServerJsonRpcMessage = serde_json::from_value(typed).unwrap();
        let rmcp::model::JsonRpcMessage::Response(response) = parsed else {
            panic!("not a response")
        };
        let rmcp::model::ServerResult::ListToolsResult(list) = response.result else {
            panic!("not a tool list")
        };
        assert_eq!(task_support(&list.tools[0]), Some("required"));
        assert_eq!(task_support(&list.tools[1]), None);
        // Written by rmcp again, it is what the server said.
        let mut again = serde_json::to_value(rmcp::model::ServerJsonRpcMessage::response(
            rmcp::model::ServerResult::ListToolsResult(list),
            rmcp::model::RequestId::Number(1),
        ))
        .unwrap();
        to_wire(&mut again);
        assert_eq!(again["result"]["tools"][0], wire["result"]["tools"][0]);
        assert_eq!(again["result"]["tools"][1]["_meta"], json!({"x": 1}));
    }

    #[test]
    fn a_calls_task_and_the_tasks_capability_go_both_ways() {
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "research", "arguments": {}, "task": {"ttl": 60000}}});
        assert_eq!(round_trip(call.clone()), call);
        let init = json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}},
            "serverInfo": {"name": "s", "version": "1"}}});
        assert_eq!(round_trip(init.clone()), init);
        // Another method's `task` is not a call's.
        let mut other = json!({"method": "elicitation/create", "params": {"task": {}}});
        assert!(!to_typed(&mut other));
    }

    #[test]
    fn a_task_of_2025_11_25_is_kept_whole() {
        let task = json!({"jsonrpc": "2.0", "id": 3, "result": {"taskId": "t1", "status": "working",
            "createdAt": "2025-01-01T00:00:00Z", "lastUpdatedAt": "2025-01-01T00:00:00Z",
            "ttl": 60000, "pollInterval": 500}});
        let mut typed = task.clone();
        to_typed(&mut typed);
        let parsed: rmcp::model::ServerJsonRpcMessage = serde_json::from_value(typed).unwrap();
        let rmcp::model::JsonRpcMessage::Response(response) = parsed else {
            panic!("not a response")
        };
        let rmcp::model::ServerResult::CustomResult(rmcp::model::CustomResult(kept)) =
            response.result
        else {
            panic!("read as a task of 2026-07-28")
        };
        assert_eq!(kept["_meta"][RESULT], task["result"]);
        assert_eq!(round_trip(task.clone()), task);
    }

    #[test]
    fn a_peer_cannot_replace_a_result_itself() {
        let mut forged = json!({"id": 4, "result": {"content": [],
            "_meta": {RESULT: {"tools": []}}}});
        assert!(to_typed(&mut forged));
        assert_eq!(forged["result"]["_meta"], json!({}));
        assert!(!may_need_typing(br#"{"id":1,"result":{"content":[]}}"#));
        assert!(wire_line(br#"{"id":1,"result":{"content":[]}}"#).is_none());
    }
}

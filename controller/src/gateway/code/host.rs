//! The gateway's side of a program's bridges ([`engine::Host`]): a tool
//! call goes through [`Gateway::forward_checked`] — the direct call's path,
//! with the arguments checked against the tool's `inputSchema` just before
//! it is sent — as the client that ran the program, `via="code"`, traced as
//! a child of the run; search and catalog read the live union.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::FutureExt as _;
use futures::future::BoxFuture;
use rmcp::model::{CallToolRequestParams, CallToolResponse, JsonObject, Tool};
use serde_json::{Value, json};
use steward_schema::validate::SchemaValidator;

use super::declare;
use super::engine::{self, Answer, Thrown};
use super::unwrap;
use crate::gateway::call::{CallFailure, Origin};
use crate::gateway::profile::Naming;
use crate::gateway::registry::Union;
use crate::gateway::{Gateway, names};
use crate::support::sync::lock;

/// The most violations an error lists.
const VIOLATIONS: usize = 3;
/// The longest expected shape an error shows.
const SHAPE_CHARS: usize = 400;
/// The longest description `searchTools` gives.
const DESCRIPTION_CHARS: usize = 200;

/// A compiled `inputSchema` (none: it does not compile here, and the
/// server alone judges the arguments).
struct Checker {
    schema: Arc<JsonObject>,
    validator: Option<SchemaValidator>,
}

/// One run's host.
pub struct RunHost {
    gateway: Arc<Gateway>,
    max_name_len: usize,
    origin: Origin,
    /// By exposed name, recompiled when the definition changes.
    checkers: Mutex<HashMap<String, Arc<Checker>>>,
}

/// Where a call goes, as the program named it.
enum Target {
    Tool { server: String, tool: String },
    Exposed(String),
}

impl RunHost {
    pub fn new(gateway: Arc<Gateway>, max_name_len: usize, origin: Origin) -> RunHost {
        RunHost {
            gateway,
            max_name_len,
            origin,
            checkers: Mutex::new(HashMap::new()),
        }
    }

    fn union(&self) -> Arc<Union> {
        self.gateway.registry.union_for(self.max_name_len)
    }

    /// The exposed name, server and tool of `target`, or why there is none.
    fn route(&self, target: Target) -> Result<(String, String, String), Thrown> {
        let union = self.union();
        match target {
            Target::Exposed(name) => {
                let route = union.tool(&name).cloned();
                let (server, tool) =
                    route.map_or_else(|| (String::new(), name.clone()), |r| (r.server, r.original));
                Ok((name, server, tool))
            }
            Target::Tool { server, tool } => {
                if let Some((listed, _)) = union
                    .tool_routes()
                    .find(|(_, r)| r.server == server && r.original == tool)
                {
                    return Ok((listed.name.to_string(), server, tool));
                }
                if !self
                    .gateway
                    .store
                    .snapshot()
                    .desired
                    .mcp
                    .contains_key(&server)
                {
                    return Err(Thrown::error(format!(
                        "no MCP server \"{server}\" in this workspace; the servers with tools are: {}",
                        listed_or_none(&union.servers())
                    )));
                }
                // Not listed now (its server is starting, or it has no such
                // tool): the call path waits for it or says why.
                let exposed =
                    names::assign([(server.as_str(), tool.as_str())], self.max_name_len).remove(0);
                Ok((exposed, server, tool))
            }
        }
    }

    /// Check `args` against `definition`'s input schema.
    fn check(&self, definition: &Tool, args: &Value, label: &str) -> Result<(), String> {
        let checker = {
            let mut checkers = lock(&self.checkers);
            let current = checkers
                .get(definition.name.as_ref())
                .filter(|c| Arc::ptr_eq(&c.schema, &definition.input_schema))
                .cloned();
            current.unwrap_or_else(|| {
                let schema = Value::Object((*definition.input_schema).clone());
                let checker = Arc::new(Checker {
                    schema: definition.input_schema.clone(),
                    validator: SchemaValidator::foreign(&schema).ok(),
                });
                checkers.insert(definition.name.to_string(), checker.clone());
                checker
            })
        };
        let Some(validator) = &checker.validator else {
            return Ok(());
        };
        let violations = validator.violations(args);
        if violations.is_empty() {
            return Ok(());
        }
        let listed: Vec<String> = violations
            .iter()
            .take(VIOLATIONS)
            .map(|(pointer, message)| {
                let at = if pointer.is_empty() {
                    "(arguments)"
                } else {
                    pointer
                };
                format!("{at}: {message}")
            })
            .collect();
        Err(format!(
            "{label}: invalid arguments, not sent: {}. Expected {}",
            listed.join("; "),
            declare::shape(&definition.input_schema, SHAPE_CHARS)
        ))
    }

    async fn call(self: Arc<Self>, request: Value) -> Answer {
        let target = match (
            request["server"].as_str(),
            request["tool"].as_str(),
            request["name"].as_str(),
        ) {
            (Some(server), Some(tool), _) => Target::Tool {
                server: server.to_owned(),
                tool: tool.to_owned(),
            },
            (_, _, Some(name)) => Target::Exposed(name.to_owned()),
            _ => return Answer::Error(Thrown::type_error("a call needs a tool")),
        };
        let label = match &target {
            Target::Tool { server, tool } => format!(
                "tools{}{}",
                declare::accessor(server),
                declare::accessor(tool)
            ),
            Target::Exposed(name) => format!("callTool(\"{name}\")"),
        };
        let (exposed, server, tool) = match self.route(target) {
            Ok(route) => route,
            Err(thrown) => return Answer::Error(thrown),
        };
        let arguments = match &request["arguments"] {
            Value::Object(map) => map.clone(),
            _ => JsonObject::new(),
        };
        let args = Value::Object(arguments.clone());
        let precheck = |definition: &Tool| self.check(definition, &args, &label);
        let params = CallToolRequestParams::new(exposed.clone()).with_arguments(arguments);
        let answer = self
            .gateway
            .forward_checked(
                &exposed,
                params,
                Naming::Prefixed(self.max_name_len),
                &self.origin,
                Some(&precheck),
            )
            .await;
        let named = |message: String| Thrown {
            kind: "ToolError",
            message,
            tool: Some(tool.clone()),
            server: (!server.is_empty()).then(|| server.clone()),
        };
        match answer {
            Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => {
                Answer::Error(named(unwrap::error_text(&result)))
            }
            Ok(CallToolResponse::Complete(result)) => Answer::Ok(unwrap::value(&result)),
            Ok(_) => Answer::Error(Thrown::error(format!(
                "{label} answered with a task or a request for input, which a program cannot take: call it directly"
            ))),
            Err(CallFailure::Invalid(why)) => Answer::Error(Thrown::type_error(why)),
            Err(CallFailure::Error(error)) => {
                Answer::Error(Thrown::error(error.message.to_string()))
            }
        }
    }
}

impl engine::Host for RunHost {
    fn call(self: Arc<Self>, request: Value) -> BoxFuture<'static, Answer> {
        RunHost::call(self, request).boxed()
    }

    fn search(&self, query: &str, limit: usize) -> Answer {
        let union = self.union();
        let index = union.index();
        let found: Vec<Value> = index
            .search(query, limit, None)
            .iter()
            .filter_map(|hit| {
                let name = index.exposed(hit.index)?;
                let (tool, route) = union.tool_routes().find(|(t, _)| t.name == name)?;
                Some(json!({
                    "name": tool.name,
                    "server": route.server,
                    "tool": route.original,
                    "description": one_line(tool.description.as_deref().unwrap_or_default()),
                }))
            })
            .collect();
        Answer::Ok(Value::Array(found))
    }

    fn catalog(&self) -> Value {
        let mut servers: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (_, route) in self.union().tool_routes() {
            servers
                .entry(route.server.clone())
                .or_default()
                .push(route.original.clone());
        }
        json!(servers)
    }
}

/// The first line of `text`, at most [`DESCRIPTION_CHARS`] characters.
fn one_line(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or_default();
    if line.chars().count() <= DESCRIPTION_CHARS {
        return line.to_owned();
    }
    let cut: String = line.chars().take(DESCRIPTION_CHARS - 1).collect();
    format!("{cut}…")
}

pub fn listed_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

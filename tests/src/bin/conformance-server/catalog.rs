//! What the conformance server offers: its tools, prompts, resources and
//! templates, as the official conformance suite's server scenarios name
//! them (each scenario's "Server Implementation Requirements"), plus a few
//! of its own for Steward's tests (`test_update_watched`, `test_echo_meta`,
//! `test_sleep`, `test_resource_link`, and `delayMs` on the tools that ask
//! the client something).

use rmcp::model::{Prompt, Resource, ResourceTemplate, Tool};
use serde_json::{Value, json};

/// A 1×1 red PNG.
pub const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV file of one silent sample.
pub const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQIAAAAAAA==";

/// The JSON Schema 2020-12 tool's input schema (SEP-1613, SEP-2106).
fn rich_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    })
}

fn tool(name: &str, description: &str, schema: Value) -> Tool {
    serde_json::from_value(json!({
        "name": name,
        "description": description,
        "inputSchema": schema,
    }))
    .expect("a tool definition")
}

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

fn string_arg(name: &str, description: &str) -> Value {
    json!({
        "type": "object",
        "properties": {name: {"type": "string", "description": description}},
        "required": [name]
    })
}

/// Every tool, in a stable order; `extra` adds the one
/// `test_trigger_tool_change` toggles.
pub fn tools(extra: bool) -> Vec<Tool> {
    let mut tools = vec![
        tool("test_simple_text", "Answers with one text block", no_args()),
        tool(
            "greet",
            "Greets by name, at once (no task)",
            string_arg("name", "Whom to greet"),
        ),
        tool(
            "slow_compute",
            "Computes for `seconds` seconds; a task for a client of the tasks extension",
            json!({"type": "object", "properties": {
                "seconds": {"type": "integer", "minimum": 0},
                "label": {"type": "string"}
            }}),
        ),
        tool(
            "failing_job",
            "A task (required) that ends in a tool error after a second",
            no_args(),
        ),
        tool(
            "protocol_error_job",
            "A task that ends in a protocol error",
            no_args(),
        ),
        tool(
            "confirm_delete",
            "A task (required) that asks to confirm before it deletes",
            string_arg("filename", "What to delete"),
        ),
        tool(
            "multi_input",
            "A task (required) that asks two questions at once",
            no_args(),
        ),
        tool(
            "test_tool_with_task",
            "Asks for a name (input_required), then greets in a task (required)",
            no_args(),
        ),
        tool("test_image_content", "Answers with a PNG image", no_args()),
        tool("test_audio_content", "Answers with a WAV clip", no_args()),
        tool(
            "test_embedded_resource",
            "Answers with an embedded resource",
            no_args(),
        ),
        tool(
            "test_multiple_content_types",
            "Answers with text, image and resource",
            no_args(),
        ),
        tool(
            "test_tool_with_logging",
            "Logs three messages while it runs",
            no_args(),
        ),
        tool(
            "test_tool_with_progress",
            "Reports progress 0, 50, 100 of 100",
            no_args(),
        ),
        tool(
            "test_error_handling",
            "Always answers with a tool error",
            no_args(),
        ),
        tool(
            "test_sampling",
            "Asks the client to sample",
            string_arg("prompt", "What to ask the model"),
        ),
        tool(
            "test_elicitation",
            "Asks the user through the client",
            string_arg("message", "What to ask the user"),
        ),
        tool(
            "test_elicitation_sep1034_defaults",
            "Elicits a form whose fields have defaults",
            no_args(),
        ),
        tool(
            "test_elicitation_sep1330_enums",
            "Elicits a form with every kind of enum",
            no_args(),
        ),
        tool(
            "test_custom_headers",
            "Takes a region that the client mirrors into an Mcp-Param header (SEP-2243)",
            json!({"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"}
            }, "required": ["region"]}),
        ),
        tool(
            "json_schema_2020_12_tool",
            "Takes input described with JSON Schema 2020-12",
            rich_schema(),
        ),
        tool(
            "test_input_required_result_elicitation",
            "Asks the user's name",
            no_args(),
        ),
        tool(
            "test_input_required_result_sampling",
            "Asks the model a question",
            no_args(),
        ),
        tool(
            "test_input_required_result_list_roots",
            "Asks for the client's roots",
            no_args(),
        ),
        tool(
            "test_input_required_result_request_state",
            "Asks for a confirmation, keeping state",
            no_args(),
        ),
        tool(
            "test_input_required_result_multiple_inputs",
            "Asks three things at once",
            no_args(),
        ),
        tool(
            "test_input_required_result_multi_round",
            "Asks two things, one after the other",
            no_args(),
        ),
        tool(
            "test_input_required_result_tampered_state",
            "Keeps signed state between rounds",
            no_args(),
        ),
        tool(
            "test_input_required_result_capabilities",
            "Asks only what the client can answer",
            no_args(),
        ),
        tool(
            "test_missing_capability",
            "Needs the client's sampling capability",
            no_args(),
        ),
        tool(
            "test_streaming_elicitation",
            "Asks the user while it runs",
            no_args(),
        ),
        tool(
            "test_logging_tool",
            "Logs when the request asks for a log level",
            no_args(),
        ),
        tool(
            "test_trigger_tool_change",
            "Adds or removes a tool (tools list_changed)",
            no_args(),
        ),
        tool(
            "test_trigger_prompt_change",
            "Adds or removes a prompt (prompts list_changed)",
            no_args(),
        ),
        tool(
            "test_update_watched",
            "Changes test://watched-resource (resources/updated)",
            no_args(),
        ),
        tool(
            "test_echo_meta",
            "Answers with the request's _meta as structured content",
            json!({"type": "object", "properties": {}, "additionalProperties": true}),
        ),
        tool(
            "test_resource_link",
            "Answers with a link to test://linked/1, which no listing shows",
            no_args(),
        ),
        tool(
            "test_sleep",
            "Answers after ms milliseconds, with a payload of bytes bytes",
            json!({"type": "object", "properties": {
                "ms": {"type": "integer"}, "bytes": {"type": "integer"}
            }}),
        ),
    ];
    if extra {
        tools.push(tool(
            "test_added_tool",
            "Added by test_trigger_tool_change",
            no_args(),
        ));
    }
    tools
}

fn prompt(name: &str, description: &str, arguments: Value) -> Prompt {
    serde_json::from_value(json!({
        "name": name,
        "description": description,
        "arguments": arguments,
    }))
    .expect("a prompt definition")
}

fn required(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description, "required": true})
}

/// Every prompt; `extra` adds the one `test_trigger_prompt_change` toggles.
pub fn prompts(extra: bool) -> Vec<Prompt> {
    let mut prompts = vec![
        prompt(
            "test_simple_prompt",
            "A prompt without arguments",
            json!([]),
        ),
        prompt(
            "test_prompt_with_arguments",
            "A prompt with two arguments",
            json!([
                required("arg1", "First test argument"),
                required("arg2", "Second test argument")
            ]),
        ),
        prompt(
            "test_prompt_with_embedded_resource",
            "A prompt that embeds a resource",
            json!([required("resourceUri", "URI of the resource to embed")]),
        ),
        prompt(
            "test_prompt_with_image",
            "A prompt with an image",
            json!([]),
        ),
        prompt(
            "test_input_required_result_prompt",
            "A prompt that asks for context first",
            json!([]),
        ),
    ];
    if extra {
        prompts.push(prompt(
            "test_added_prompt",
            "Added by test_trigger_prompt_change",
            json!([]),
        ));
    }
    prompts
}

pub fn resources() -> Vec<Resource> {
    [
        (
            "test://static-text",
            "static-text",
            "A text resource",
            "text/plain",
        ),
        (
            "test://static-binary",
            "static-binary",
            "A PNG image",
            "image/png",
        ),
        (
            "test://watched-resource",
            "watched-resource",
            "A resource that changes (subscribe to it)",
            "text/plain",
        ),
    ]
    .into_iter()
    .map(|(uri, name, description, mime)| {
        serde_json::from_value(json!({
            "uri": uri, "name": name, "description": description, "mimeType": mime
        }))
        .expect("a resource")
    })
    .collect()
}

pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        serde_json::from_value(json!({
            "uriTemplate": "test://template/{id}/data",
            "name": "template-data",
            "description": "Data for one id",
            "mimeType": "application/json"
        }))
        .expect("a template"),
    ]
}

/// Completion values for a prompt argument, those that start with `value`.
pub fn complete(argument: &str, value: &str) -> Vec<String> {
    let all: &[&str] = match argument {
        "arg1" | "arg2" => &["paris", "park", "party", "test", "testing"],
        _ => &[],
    };
    all.iter()
        .filter(|v| v.starts_with(value))
        .map(|v| (*v).to_owned())
        .collect()
}

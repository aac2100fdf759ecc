//! What the server asks of the client while it serves a request
//! (elicitation, sampling, roots), in one or more rounds, and how: on a
//! session of the initialize lifecycle, as requests of its own; on
//! 2026-07-28, as an `input_required` result (SEP-2322) whose
//! `inputRequests` the client answers by retrying with `inputResponses`
//! (and the `requestState` echoed, signed here, so that a tampered one is
//! refused).

use std::collections::BTreeMap;

use rmcp::RoleServer;
use rmcp::model::{
    ClientCapabilities, ErrorCode, ErrorData, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, ProtocolVersion, ServerRequest,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

/// Whether `context` is a request of 2026-07-28 or later.
pub fn modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// What the client declared: per request on 2026-07-28, for the session
/// before.
pub fn capabilities(context: &RequestContext<RoleServer>) -> Option<ClientCapabilities> {
    context.client_capabilities()
}

/// How the answers are told back.
#[derive(Debug, Clone, Copy)]
enum Summary {
    Sampling,
    User,
    Completed,
    Hello,
    Roots,
    Confirm,
    Multiple,
    MultiRound,
    Probe,
    Context,
}

/// One request to the client, under the key the server gives it.
type Question = (String, Value);

/// What to ask (see the module doc).
pub struct Ask {
    rounds: Vec<Vec<Question>>,
    summary: Summary,
    /// Carry a signed `requestState` (and say "state-ok" once it checked).
    stateful: bool,
    /// Ask only what the client declared it can answer.
    declared_only: bool,
}

/// The outcome of asking.
pub enum Asked {
    /// More input is needed (2026-07-28).
    Input(InputRequiredResult),
    /// Every answer came: the text the result carries.
    Answered(String),
}

pub fn elicit(message: &str, schema: Value) -> Value {
    json!({"method": "elicitation/create", "params": {"message": message, "requestedSchema": schema}})
}

fn one_string(field: &str) -> Value {
    json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]})
}

fn sample(text: &str, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max_tokens
    }})
}

fn error(code: ErrorCode, message: impl Into<String>, data: Option<Value>) -> ErrorData {
    ErrorData::new(code, message.into(), data)
}

impl Ask {
    fn one(key: &str, request: Value, summary: Summary) -> Ask {
        Ask {
            rounds: vec![vec![(key.to_owned(), request)]],
            summary,
            stateful: false,
            declared_only: false,
        }
    }

    pub fn stateful(mut self) -> Ask {
        self.stateful = true;
        self
    }

    pub fn sampling(key: &str, prompt: &str, max_tokens: u32) -> Ask {
        Ask::one(key, sample(prompt, max_tokens), Summary::Sampling)
    }

    pub fn elicit_user(message: &str) -> Ask {
        let schema = json!({
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"}
            },
            "required": ["username", "email"]
        });
        Ask::one("elicitation", elicit(message, schema), Summary::User)
    }

    pub fn elicit_defaults() -> Ask {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                "verified": {"type": "boolean", "default": true}
            }
        });
        Ask::one(
            "defaults",
            elicit("Please review the defaults", schema),
            Summary::Completed,
        )
    }

    pub fn elicit_enums() -> Ask {
        let schema = json!({
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {"type": "string", "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"}
                ]},
                "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"]},
                "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                "titledMulti": {"type": "array", "items": {"anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"}
                ]}}
            }
        });
        Ask::one("enums", elicit("Please choose", schema), Summary::Completed)
    }

    pub fn elicit_name(key: &str, message: &str) -> Ask {
        Ask::one(key, elicit(message, one_string("name")), Summary::Hello)
    }

    pub fn elicit_context(key: &str) -> Ask {
        Ask::one(
            key,
            elicit("What context should the prompt use?", one_string("context")),
            Summary::Context,
        )
    }

    pub fn roots(key: &str) -> Ask {
        Ask::one(
            key,
            json!({"method": "roots/list", "params": {}}),
            Summary::Roots,
        )
    }

    pub fn confirm(key: &str) -> Ask {
        let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
        Ask::one(key, elicit("Please confirm", schema), Summary::Confirm)
    }

    pub fn multiple() -> Ask {
        Ask {
            rounds: vec![vec![
                (
                    "user_name".into(),
                    elicit("What is your name?", one_string("name")),
                ),
                ("greeting".into(), sample("Generate a greeting", 50)),
                (
                    "client_roots".into(),
                    json!({"method": "roots/list", "params": {}}),
                ),
            ]],
            summary: Summary::Multiple,
            stateful: false,
            declared_only: false,
        }
    }

    pub fn multi_round() -> Ask {
        Ask {
            rounds: vec![
                vec![(
                    "step1".into(),
                    elicit("Step 1: What is your name?", one_string("name")),
                )],
                vec![(
                    "step2".into(),
                    elicit("Step 2: What is your favorite color?", one_string("color")),
                )],
            ],
            summary: Summary::MultiRound,
            stateful: true,
            declared_only: false,
        }
    }

    pub fn capabilities_probe() -> Ask {
        Ask {
            rounds: vec![vec![
                (
                    "probe_elicitation".into(),
                    elicit("What is your name?", one_string("name")),
                ),
                ("probe_sampling".into(), sample("Say hello", 20)),
            ]],
            summary: Summary::Probe,
            stateful: false,
            declared_only: true,
        }
    }

    /// Ask on `context`'s lifecycle; `responses` and `state` are what a
    /// 2026-07-28 client sent back with its retry.
    pub async fn run(
        self,
        context: &RequestContext<RoleServer>,
        responses: Option<&InputResponses>,
        state: Option<&str>,
        secret: &str,
    ) -> Result<Asked, ErrorData> {
        if modern(context) {
            self.input_required(context, responses, state, secret)
        } else {
            self.ask_session(context).await
        }
    }

    fn declared(&self, context: &RequestContext<RoleServer>, request: &Value) -> bool {
        let caps = capabilities(context).unwrap_or_default();
        match request["method"].as_str() {
            Some("elicitation/create") => caps.elicitation.is_some(),
            Some("sampling/createMessage") => caps.sampling.is_some(),
            Some("roots/list") => caps.roots.is_some(),
            _ => true,
        }
    }

    fn input_required(
        self,
        context: &RequestContext<RoleServer>,
        responses: Option<&InputResponses>,
        state: Option<&str>,
        secret: &str,
    ) -> Result<Asked, ErrorData> {
        let carries_state = self.stateful || self.rounds.len() > 1;
        let round = match state {
            Some(state) if carries_state => open(secret, state)?,
            _ => 0,
        };
        let Some(questions) = self.rounds.get(round) else {
            return Err(error(
                ErrorCode::INVALID_PARAMS,
                "requestState names no round of this request",
                None,
            ));
        };
        let questions: Vec<&Question> = questions
            .iter()
            .filter(|(_, request)| !self.declared_only || self.declared(context, request))
            .collect();
        let empty = InputResponses::new();
        let responses = responses.unwrap_or(&empty);
        let mut answers = BTreeMap::new();
        for (key, _) in &questions {
            if let Some(answer) = responses.get(key) {
                if !answer.is_object() {
                    return Err(error(
                        ErrorCode::INVALID_PARAMS,
                        format!("inputResponses[{key:?}] is not a result object"),
                        Some(json!({"key": key})),
                    ));
                }
                answers.insert(key.clone(), answer.clone());
            }
        }
        if answers.len() == questions.len() && !questions.is_empty() {
            if round + 1 < self.rounds.len() {
                let next: Vec<&Question> = self.rounds[round + 1].iter().collect();
                return Ok(Asked::Input(requests(
                    &next,
                    Some(seal(secret, round + 1)),
                )?));
            }
            let state_ok = carries_state && state.is_some();
            return Ok(Asked::Answered(self.summary(&answers, state_ok)));
        }
        let state = carries_state.then(|| seal(secret, round));
        Ok(Asked::Input(requests(&questions, state)?))
    }

    async fn ask_session(self, context: &RequestContext<RoleServer>) -> Result<Asked, ErrorData> {
        let mut answers = BTreeMap::new();
        for round in &self.rounds {
            for (key, request) in round {
                if !self.declared(context, request) {
                    if self.declared_only {
                        continue;
                    }
                    let what = request["method"].as_str().unwrap_or_default();
                    return Err(error(
                        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                        format!("the client did not declare the capability {what} needs"),
                        None,
                    ));
                }
                let request: ServerRequest =
                    serde_json::from_value(request.clone()).map_err(|e| {
                        error(ErrorCode::INTERNAL_ERROR, format!("build {key}: {e}"), None)
                    })?;
                let answer = context
                    .peer
                    .send_request(request)
                    .await
                    .map_err(|e| match e {
                        rmcp::service::ServiceError::McpError(e) => e,
                        other => error(
                            ErrorCode::INTERNAL_ERROR,
                            format!("ask the client: {other}"),
                            None,
                        ),
                    })?;
                answers.insert(
                    key.clone(),
                    serde_json::to_value(&answer).unwrap_or(Value::Null),
                );
            }
        }
        Ok(Asked::Answered(self.summary(&answers, false)))
    }

    fn summary(&self, answers: &BTreeMap<String, Value>, state_ok: bool) -> String {
        let first = answers.values().next().cloned().unwrap_or(Value::Null);
        let content = &first["content"];
        let text = match self.summary {
            Summary::Sampling => format!(
                "LLM response: {}",
                content["text"].as_str().unwrap_or_default()
            ),
            Summary::User => format!(
                "User response: <action: {}, content: {}>",
                first["action"].as_str().unwrap_or_default(),
                content
            ),
            Summary::Completed => format!(
                "Elicitation completed: action={}, content={}",
                first["action"].as_str().unwrap_or_default(),
                content
            ),
            Summary::Hello => format!("Hello, {}!", content["name"].as_str().unwrap_or("stranger")),
            Summary::Roots => {
                let uris: Vec<&str> = first["roots"]
                    .as_array()
                    .map(|roots| roots.iter().filter_map(|r| r["uri"].as_str()).collect())
                    .unwrap_or_default();
                format!("Roots: {}", uris.join(", "))
            }
            Summary::Confirm => format!("confirmed: {}", content["ok"]),
            Summary::Multiple | Summary::Probe => format!(
                "answers: {}",
                Value::Object(answers.clone().into_iter().collect())
            ),
            Summary::MultiRound => format!(
                "favorite color: {}",
                content["color"].as_str().unwrap_or_default()
            ),
            Summary::Context => content["context"].as_str().unwrap_or_default().to_owned(),
        };
        if state_ok {
            format!("{text} (state-ok)")
        } else {
            text
        }
    }
}

/// An `input_required` result asking `questions`.
pub fn requests(
    questions: &[&Question],
    state: Option<String>,
) -> Result<InputRequiredResult, ErrorData> {
    let mut map = InputRequests::new();
    for (key, request) in questions {
        let request: InputRequest = serde_json::from_value(request.clone())
            .map_err(|e| error(ErrorCode::INTERNAL_ERROR, format!("build {key}: {e}"), None))?;
        map.insert(key.clone(), request);
    }
    Ok(InputRequiredResult::new(Some(map), state))
}

fn tag(secret: &str, payload: &str) -> String {
    let digest = Sha256::digest(format!("{secret}\0{payload}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A request state for `round`, signed.
fn seal(secret: &str, round: usize) -> String {
    let payload = format!("round-{round}");
    format!("{payload}.{}", tag(secret, &payload))
}

/// The round a signed request state names; a tampered one is refused.
fn open(secret: &str, state: &str) -> Result<usize, ErrorData> {
    let refused = || {
        error(
            ErrorCode::INVALID_PARAMS,
            "requestState failed its integrity check",
            Some(json!({"requestState": state})),
        )
    };
    let (payload, signature) = state.rsplit_once('.').ok_or_else(refused)?;
    if tag(secret, payload) != signature {
        return Err(refused());
    }
    payload
        .strip_prefix("round-")
        .and_then(|n| n.parse().ok())
        .ok_or_else(refused)
}
